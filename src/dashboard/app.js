/* posenc dashboard: the page's entry point and its views.
 *
 *   Tables              any table of the catalogue (GET /v1) with its parameters: rank 1 as a line
 *                       chart, rank 2 as a heatmap, rank 3 (RoPE cos/sin, ALiBi per head) as
 *                       panels, one at a time or all in a grid.
 *   Position similarity /v1/analysis/similarity as a matrix, and one row of it as a curve: the
 *                       figure that shows sinusoidal encodings decay symmetrically with distance.
 *   RoPE decay          /v1/analysis/rope-decay (RoFormer §3.4.3), optionally for several bases.
 *   exact vs hf         |exact − hf| (or ggml) of one table as a heatmap plus its maximum per
 *                       position: where float32 arithmetic drifts at long positions.
 *   M-RoPE              mrope.js: the t, h, w position rows of a text+image+video sequence and
 *                       which frequency follows which row.
 *   Why order matters   /v1/analysis/order: attention on a sentence and on it reordered (order.js).
 *   Axial RoPE          axial.js: an image's or a video's position ids per axis and the channel
 *                       band each axis rotates (FLUX, HunyuanVideo, Wan, CogVideoX, Qwen-Image).
 *
 * Every view builds its controls from the catalogue, fetches format=bin tables from the same
 * origin, draws them itself, shows the curl and Python snippets for exactly those requests, and
 * shows an API error's problem+json detail (marking the parameter it names) instead of failing
 * silently. A view loads when it is first shown; edits redraw after a short pause. The view
 * element carries data-state (idle, loading, ready, error) and data-url (the requests drawn), which
 * the browser tests wait on. The selected view is kept in the URL's #fragment. */

import { buildUrl, formatValue, getCatalogue } from './api.js';
import { buildForm, el } from './controls.js';
import { MAX_GRID } from './heatmap.js';
import { fmtTick } from './charts.js';
import { COLORMAPS } from './colormap.js';
import { View } from './view.js';
import { MropeView } from './mrope.js';
import { OrderView } from './order.js';
import { PlanView } from './plan.js'; /* Model plan: POST /v1/plan (plan.js) */
import { AxialView } from './axial.js';

/* How to name the axes of each table; tables not listed get generic names. rowStart(form) is the
 * position of row 0 (offset), so tick labels and read-outs show real positions. */
const offsetOf = (form) => Number(form.value('offset') || 0);
const AXES = {
	'sinusoidal': { y: 'position', x: 'dimension', rowStart: offsetOf },
	'sinusoidal2d': { y: 'patch (row-major, cls first)', x: 'dimension' },
	'rope': { panels: ['cos', 'sin'], y: 'position', x: 'dimension', rowStart: offsetOf },
	'rope2d': { panels: ['cos', 'sin'], y: 'patch (in the model\'s order)', x: 'dimension' },
	'alibi': {
		panels: (i) => `head ${i}`, y: 'query position', x: 'key',
		rowStart: (form) => {
			const off = form.value('offset');
			if (off !== '' && off !== undefined) return Number(off);
			const q = Number(form.value('q_len')), k = form.value('k_len');
			return (k === '' || k === undefined ? q : Number(k)) - q;
		},
	},
	'alibi/slopes': { x: 'head', v: 'slope' },
	'relative/t5': { y: 'query', x: 'key', v: 'bucket' },
	'relative/xl': { y: 'row (relative position len−1−row)', x: 'dimension' },
	'relative/deberta': { y: 'query', x: 'key', v: 'relative position q − k (log-bucketed)' },
	'rope/query-scale': { x: 'position', v: 'query scale' },
	'rope/inv_freq': { x: 'frequency index i', v: 'inv_freq (radians per position)' },
	'analysis/similarity': { y: 'position i', x: 'position j', rowStart: offsetOf, colStart: offsetOf },
	'analysis/rope-decay': { x: 'relative distance m − n', v: 'mean |Σ e^{i(m−n)θ}|' },
};

function axesOf(name) {
	return AXES[name] || {};
}

/* rows / cols / panels of a tensor of rank 2 or 3, with names. */
function layoutOf(shape, name) {
	const ax = axesOf(name);
	const panels = shape.length === 3 ? shape[0] : 1;
	const names = Array.from({ length: panels }, (_, i) =>
		Array.isArray(ax.panels) && ax.panels[i] ? ax.panels[i] : typeof ax.panels === 'function' ? ax.panels(i) : `panel ${i}`);
	return { rows: shape[shape.length - 2], cols: shape[shape.length - 1], panels, panelNames: names };
}

/* A Python identifier and a file name for a table name ("alibi/slopes" -> alibi_slopes). */
const slug = (name) => name.replace(/[^A-Za-z0-9]+/g, '_');

/* A labelled select that is not a catalogue parameter (table, colour map, panel, ...). */
function selectField(labelText, options, value, help, name) {
	const id = `sel-${Math.random().toString(36).slice(2, 8)}`;
	const select = el('select', { id, name });
	for (const o of options) select.append(el('option', { value: o.value, text: o.text }));
	if (value !== undefined) select.value = value;
	const row = el('div', { class: 'field' }, el('label', { for: id, text: labelText }), select);
	if (help) row.append(el('small', { class: 'help', text: help }));
	return { row, select };
}

/* Draw a tensor on a heatmap (rank 2, 3) or a line chart (rank 1): shared by Tables and exact vs hf. */
function drawTensor({ heat, line, shape, data, dtype, name, form, cmap, panel, title, format, range, v }) {
	const ax = axesOf(name);
	const fmt = format || ((x) => formatValue(x, dtype));
	if (shape.length === 1 || shape.length === 0) {
		heat.box.hidden = true;
		line.box.hidden = false;
		line.fig.show({
			series: [{ y: data, label: name }], xLabel: ax.x || 'index', yLabel: v || ax.v || 'value', title, format: fmt,
		});
		return null;
	}
	if (shape.length > 3) throw new Error(`cannot draw a rank-${shape.length} table`);
	line.box.hidden = true;
	heat.box.hidden = false;
	const L = layoutOf(shape, name);
	const r0 = ax.rowStart ? ax.rowStart(form) : 0, c0 = ax.colStart ? ax.colStart(form) : 0;
	heat.fig.show({
		data, dtype, ...L, panel: L.panels > 1 ? panel : 0,
		yName: ax.y || 'row', xName: ax.x || 'column',
		rowValue: (i) => r0 + i, colValue: (j) => c0 + j,
		title, cmap, square: L.rows === L.cols && name.startsWith('analysis/'), format: fmt, range,
	});
	return L;
}

/* Keep a panel <select> in step with the panel count; 'all' (grid) while there are few. */
function syncPanels(select, L, fallback) {
	const opts = [];
	if (L.panels <= MAX_GRID) opts.push({ value: '-1', text: `all ${L.panels} (grid)` });
	L.panelNames.forEach((n, i) => opts.push({ value: String(i), text: n }));
	const key = opts.map((o) => o.value + o.text).join('|');
	if (select.dataset.key !== key) {
		const keep = select.value;
		select.replaceChildren(...opts.map((o) => el('option', { value: o.value, text: o.text })));
		select.dataset.key = key;
		select.value = opts.some((o) => o.value === keep) ? keep : fallback;
		if (!select.value) select.value = opts[0].value;
	}
	return Number(select.value);
}

/* ---- Tables ---- */

class TablesView extends View {
	constructor(catalogue) {
		super('view-tables', 'Tables');
		this.entries = catalogue.tables;
		const pick = selectField('table', this.entries.map((t) => ({ value: t.name, text: t.name })), 'sinusoidal', undefined, 'table');
		this.tableSelect = pick.select;
		this.summary = el('p', { class: 'summary' });
		this.formBox = el('div', { class: 'params' });
		const cm = selectField('colour map', [
			{ value: 'viridis', text: 'viridis' }, { value: 'RdBu', text: 'RdBu (diverging, centred on 0)' }], 'viridis', undefined, 'cmap');
		this.cmapSelect = cm.select;
		const pn = selectField('panel', [], undefined, undefined, 'panel');
		this.panelSelect = pn.select;
		this.panelRow = pn.row;
		this.panelRow.hidden = true;
		this.controls.append(el('h2', { text: 'Table' }), pick.row, this.summary, this.formBox, this.submitRow());
		this.figures.append(el('div', { class: 'toolbar', role: 'group', 'aria-label': 'Display' }, cm.row, pn.row));
		this.heat = this.figureBox('heat', 'table heatmap', 'tall');
		this.line = this.figureBox('line', 'table chart', 'tall');
		this.line.box.hidden = true;
		this.tableSelect.addEventListener('change', () => this.setTable(this.tableSelect.value));
		this.cmapSelect.addEventListener('change', () => this.redraw());
		this.panelSelect.addEventListener('change', () => this.redraw());
		this.setTable('sinusoidal', { len: '64', dim: '128' }, false);
	}

	setTable(name, initial = {}, load = true) {
		this.entry = this.entries.find((t) => t.name === name) || this.entries[0];
		this.tableSelect.value = this.entry.name;
		this.summary.textContent = this.entry.summary || '';
		this.form = buildForm(this.formBox, this.entry, { initial, onChange: () => this.schedule() });
		if (load) this.refresh();
	}

	requests() {
		const e = this.entry;
		return [{ url: buildUrl(e.path, [...this.form.pairs(), ['format', 'bin']]), file: `${slug(e.name)}.npy`, name: slug(e.name) }];
	}

	present([t]) {
		this.last = t;
		this.redraw();
	}

	redraw() {
		const t = this.last;
		if (!t) return;
		const e = this.entry;
		const L3 = t.shape.length === 3 ? layoutOf(t.shape, e.name) : null;
		this.panelRow.hidden = !L3;
		const panel = L3 ? syncPanels(this.panelSelect, L3, '-1') : 0;
		const cmap = COLORMAPS[this.cmapSelect.value];
		drawTensor({
			heat: this.heat, line: this.line, shape: t.shape, data: t.data, dtype: t.dtype, name: e.name, form: this.form,
			cmap, panel, title: `${e.name} [${t.shape.join(' × ')}] ${t.dtype}`,
		});
		let lo = Infinity, hi = -Infinity;
		for (const x of t.data) if (Number.isFinite(x) && x > -3e38) { if (x < lo) lo = x; if (x > hi) hi = x; }
		const parts = [`Shape [${t.shape.join(', ')}], ${t.dtype}, values ${fmtTick(lo)} … ${fmtTick(hi)}.`];
		if (t.attentionScaling !== null && t.attentionScaling !== 1) parts.push(`attention_scaling ${t.attentionScaling} (already applied).`);
		if (t.shape.length >= 2) parts.push(`Colours: ${cmap.name}${cmap.diverging ? ', centred on 0' : ''}, one scale for the whole table.`);
		this.caption.textContent = parts.join(' ');
	}
}

/* ---- Position similarity ---- */

class SimilarityView extends View {
	constructor(catalogue) {
		super('view-similarity', 'Position similarity');
		this.entry = catalogue.tables.find((t) => t.name === 'analysis/similarity');
		this.formBox = el('div', { class: 'params' });
		this.controls.append(el('h2', { text: 'Similarity' }),
			el('p', { class: 'summary', text: 'Dot products between the encodings of every pair of positions. Sinusoidal and RoPE products depend only on the distance i − j: the matrix is symmetric with its maximum on the diagonal.' }),
			this.formBox, this.submitRow());
		this.form = buildForm(this.formBox, this.entry, { initial: { len: '128', dim: '128' }, onChange: () => this.schedule() });
		this.figures.classList.add('pair');
		this.heat = this.figureBox('heat', 'similarity matrix', 'square');
		this.line = this.figureBox('line', 'similarity of one position with every other', 'side');
		this.heat.fig.onCursor = (cell) => { if (cell.r !== this.row) { this.row = cell.r; this.drawRow(); } };
	}

	requests() {
		return [{ url: buildUrl(this.entry.path, [...this.form.pairs(), ['format', 'bin']]), file: 'similarity.npy', name: 'sim' }];
	}

	present([t]) {
		this.last = t;
		const n = t.shape[0];
		if (!(this.row < n)) this.row = Math.floor(n / 2);
		drawTensor({
			heat: this.heat, line: { box: { hidden: true } }, shape: t.shape, data: t.data, dtype: t.dtype,
			name: this.entry.name, form: this.form, cmap: COLORMAPS.viridis, panel: 0,
			title: `${this.form.value('encoding')} similarity [${t.shape.join(' × ')}]`,
		});
		this.line.box.hidden = false;
		this.drawRow();
		let maxOff = 0;
		for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) maxOff = Math.max(maxOff, Math.abs(t.data[i * n + j] - t.data[j * n + i]));
		this.caption.textContent = `${n} positions. Largest asymmetry |S[i,j] − S[j,i]| = ${formatValue(maxOff, 'f64')}. ` +
			'Hover a row of the matrix to plot it on the right.';
	}

	drawRow() {
		const t = this.last, n = t.shape[0], r = this.row;
		const off = offsetOf(this.form);
		this.line.fig.show({
			x: Float64Array.from({ length: n }, (_, j) => off + j),
			series: [{ y: t.data.subarray(r * n, (r + 1) * n), label: `i = ${off + r}` }],
			xLabel: 'position j', yLabel: `similarity to position i = ${off + r}`,
			title: `row i = ${off + r}: peak at j = i, symmetric decay`, format: (x) => formatValue(x, t.dtype),
		});
	}
}

/* ---- RoPE decay ---- */

class DecayView extends View {
	constructor(catalogue) {
		super('view-decay', 'RoPE decay');
		this.entry = catalogue.tables.find((t) => t.name === 'analysis/rope-decay');
		this.formBox = el('div', { class: 'params' });
		const id = 'decay-compare';
		this.compare = el('input', { id, type: 'text', placeholder: 'e.g. 500000, 1000000', spellcheck: 'false', 'aria-describedby': `${id}-help` });
		this.compare.addEventListener('input', () => this.schedule(600));
		this.controls.append(el('h2', { text: 'Long-term decay' }),
			el('p', { class: 'summary', text: 'RoFormer §3.4.3: the relative upper bound of RoPE attention, mean over j of |Σ_{k<j} e^{i(m−n)θ_k}|, falls as the distance m − n grows.' }),
			this.formBox,
			el('div', { class: 'field' }, el('label', { for: id, text: 'compare with bases' }), this.compare,
				el('small', { id: `${id}-help`, class: 'help', text: 'more curves: other rope_theta values, comma separated (Llama 3: 500000)' })),
			this.submitRow());
		this.form = buildForm(this.formBox, this.entry, { onChange: () => this.schedule() });
		this.line = this.figureBox('line', 'RoPE long-term decay', 'tall');
	}

	bases() {
		return this.compare.value.split(',').map((s) => s.trim()).filter((s) => s !== '').slice(0, 4);
	}

	requests() {
		const pairs = this.form.pairs();
		const out = [{ url: buildUrl(this.entry.path, [...pairs, ['format', 'bin']]), file: 'decay.npy', name: 'decay', base: this.form.value('base') }];
		this.bases().forEach((b, k) => {
			const order = this.entry.params.map((q) => q.name);
			const p = [...pairs.filter(([n]) => n !== 'base'), ['base', b]].sort((x, y) => order.indexOf(x[0]) - order.indexOf(y[0]));
			out.push({ url: buildUrl(this.entry.path, [...p, ['format', 'bin']]), file: `decay_${k + 1}.npy`, name: `decay_${k + 1}`, base: b, comment: `base ${b}` });
		});
		return out;
	}

	present(results, requests) {
		const dim = this.form.value('dim');
		this.line.fig.show({
			series: results.map((t, k) => ({ y: t.data, label: `base ${requests[k].base}` })),
			xLabel: 'relative distance m − n', yLabel: 'relative upper bound',
			title: `RoPE long-term decay, dim ${dim}`, format: (x) => formatValue(x, results[0].dtype), zeroBased: true,
		});
		const d = results[0].data;
		this.caption.textContent = `${d.length} distances. At distance 0 the bound is ${formatValue(d[0], results[0].dtype)}; ` +
			`at ${d.length - 1} it is ${formatValue(d[d.length - 1], results[0].dtype)}.`;
	}
}

/* ---- exact vs hf ---- */

class CompatView extends View {
	constructor(catalogue) {
		super('view-compat', 'exact vs hf');
		const hasAlt = (t) => (t.params || []).some((p) => p.name === 'compat' && (p.choices || []).some((c) => c !== 'exact'));
		this.entries = catalogue.tables.filter((t) => hasAlt(t) && !t.name.startsWith('analysis/'));
		const pick = selectField('table', this.entries.map((t) => ({ value: t.name, text: t.name })), 'sinusoidal', undefined, 'table');
		this.tableSelect = pick.select;
		this.against = selectField('compare exact with', [], undefined, 'hf: PyTorch / transformers float32 order of operations; ggml: llama.cpp', 'against');
		this.formBox = el('div', { class: 'params' });
		const id = 'compat-offset-log';
		this.slider = el('input', { id, type: 'range', min: '0', max: '12', step: '0.25', value: '6', 'aria-describedby': `${id}-out` });
		this.sliderOut = el('output', { id: `${id}-out`, for: id });
		this.sliderRow = el('div', { class: 'field field-range' }, el('label', { for: id, text: 'offset (log scale)' }), this.slider, this.sliderOut);
		this.controls.append(el('h2', { text: 'Arithmetic drift' }),
			el('p', { class: 'summary', text: 'compat=exact computes in double and rounds once; hf repeats PyTorch’s float32 steps. Their difference grows with the position: move the offset to long positions.' }),
			pick.row, this.against.row, this.sliderRow, this.formBox, this.submitRow());
		this.heat = this.figureBox('heat', '|exact − hf| heatmap', 'medium');
		this.line = this.figureBox('line', '|exact − hf| chart', 'medium');
		this.line.box.hidden = true;
		this.rowmax = this.figureBox('line', 'largest difference per position', 'short');
		this.detail = el('p', { class: 'detail' });
		this.heat.box.append(this.detail);
		this.heat.fig.onCursor = (cell) => this.explain(cell);
		this.tableSelect.addEventListener('change', () => this.setTable(this.tableSelect.value));
		this.against.select.addEventListener('change', () => this.schedule(0));
		this.slider.addEventListener('input', () => {
			const v = Number(this.slider.value);
			this.form.set('offset', v === 0 ? '0' : String(Math.round(10 ** v)));
			this.sliderOut.textContent = this.form.value('offset');
			this.schedule();
		});
		this.setTable('sinusoidal', { len: '64', dim: '128', offset: '1000000' }, false);
	}

	setTable(name, initial = {}, load = true) {
		this.entry = this.entries.find((t) => t.name === name) || this.entries[0];
		this.tableSelect.value = this.entry.name;
		const compat = this.entry.params.find((p) => p.name === 'compat');
		const alts = compat.choices.filter((c) => c !== 'exact');
		const keep = this.against.select.value;
		this.against.select.replaceChildren(...alts.map((c) => el('option', { value: c, text: c })));
		this.against.select.value = alts.includes(keep) ? keep : alts[0];
		this.form = buildForm(this.formBox, this.entry, { initial, exclude: ['compat'], onChange: (n) => { if (n === 'offset') this.syncSlider(); this.schedule(); } });
		const off = this.form.input('offset');
		this.sliderRow.hidden = !off;
		if (off) {
			const p = this.entry.params.find((q) => q.name === 'offset');
			this.slider.max = String(Math.min(15, Math.floor(Math.log10(p.maximum || 1e12))));
			this.syncSlider();
		}
		if (load) this.refresh();
	}

	syncSlider() {
		const v = Number(this.form.value('offset') || 0);
		this.slider.value = String(v > 0 ? Math.log10(v) : 0);
		this.sliderOut.textContent = String(v);
	}

	requests() {
		const e = this.entry, alt = this.against.select.value, base = this.form.pairs();
		return [
			{ url: buildUrl(e.path, [...base, ['compat', 'exact'], ['format', 'bin']]), file: `${slug(e.name)}_exact.npy`, name: 'exact' },
			{ url: buildUrl(e.path, [...base, ['compat', alt], ['format', 'bin']]), file: `${slug(e.name)}_${alt}.npy`, name: alt },
		];
	}

	combine(requests) {
		const alt = requests[1].name;
		return [`diff = np.abs(exact.astype(np.float64) - ${alt}.astype(np.float64))`,
			'print(diff.max(), np.unravel_index(diff.argmax(), diff.shape))'];
	}

	present([a, b], requests) {
		if (a.shape.join() !== b.shape.join()) throw new Error(`shapes differ: [${a.shape}] vs [${b.shape}]`);
		const alt = requests[1].name, n = a.data.length;
		const diff = new Float64Array(n);
		let max = 0, at = 0, differ = 0;
		for (let i = 0; i < n; i++) {
			const d = Math.abs(a.data[i] - b.data[i]);
			diff[i] = d;
			if (d > 0) differ++;
			if (d > max) { max = d; at = i; }
		}
		this.last = { a, b, diff, alt };
		const e = this.entry;
		const L = drawTensor({
			heat: this.heat, line: this.line, shape: a.shape, data: diff, dtype: 'f64', name: e.name, form: this.form,
			cmap: COLORMAPS.viridis, panel: -1, range: { lo: 0, hi: max },
			title: `|exact − ${alt}| of ${e.name} [${a.shape.join(' × ')}]`, format: (x) => formatValue(x, 'f64'), v: `|exact − ${alt}|`,
		});
		this.rowmax.box.hidden = !L;
		if (L) {
			const perRow = new Float64Array(L.rows);
			for (let p = 0; p < L.panels; p++)
				for (let r = 0; r < L.rows; r++)
					for (let c = 0; c < L.cols; c++) perRow[r] = Math.max(perRow[r], diff[(p * L.rows + r) * L.cols + c]);
			const ax = axesOf(e.name), r0 = ax.rowStart ? ax.rowStart(this.form) : 0;
			this.rowmax.fig.show({
				x: Float64Array.from({ length: L.rows }, (_, i) => r0 + i), series: [{ y: perRow, label: 'max' }],
				xLabel: ax.y || 'row', yLabel: `max |exact − ${alt}|`, title: `largest difference per ${ax.y || 'row'}`,
				format: (x) => formatValue(x, 'f64'), zeroBased: true,
			});
		}
		const where = this.describe(at);
		this.caption.textContent = max === 0
			? `exact and ${alt} agree bit for bit on all ${n} values here.`
			: `${differ} of ${n} values differ; the largest difference is ${formatValue(max, 'f64')} at ${where}.`;
		this.detail.textContent = '';
	}

	describe(i) {
		const { a } = this.last, e = this.entry, ax = axesOf(e.name);
		if (a.shape.length < 2) return `${ax.x || 'index'} ${i}`;
		const L = layoutOf(a.shape, e.name), r0 = ax.rowStart ? ax.rowStart(this.form) : 0;
		const p = Math.floor(i / (L.rows * L.cols)), r = Math.floor(i / L.cols) % L.rows, c = i % L.cols;
		return `${L.panels > 1 ? `${L.panelNames[p]}, ` : ''}${ax.y || 'row'} ${r0 + r}, ${ax.x || 'column'} ${c}`;
	}

	explain(cell) {
		const { a, b, alt } = this.last, L = layoutOf(a.shape, this.entry.name);
		const i = (cell.p * L.rows + cell.r) * L.cols + cell.c;
		this.detail.textContent = `exact ${formatValue(a.data[i], a.dtype)}, ${alt} ${formatValue(b.data[i], b.dtype)}`;
	}
}

/* A view whose table this daemon's catalogue lacks (an older or trimmed posencd): says so. */
class MissingView {
	constructor(id, what) {
		this.root = document.getElementById(id);
		this.root.append(el('p', { class: 'error', text: `This posencd does not serve ${what} (it is not in GET /v1).` }));
		this.root.dataset.state = 'missing';
	}

	show() {}
}

/* ---- tabs and start-up ---- */

function setupTabs(views) {
	const tabs = [...document.querySelectorAll('[role="tab"]')];
	const select = (tab, focus) => {
		for (const t of tabs) {
			const on = t === tab;
			t.setAttribute('aria-selected', String(on));
			t.tabIndex = on ? 0 : -1;
			document.getElementById(t.getAttribute('aria-controls')).hidden = !on;
		}
		if (focus) tab.focus();
		const id = tab.id.replace('tab-', '');
		history.replaceState(null, '', `#${id}`);
		views[id].show();
	};
	tabs.forEach((tab, k) => {
		tab.addEventListener('click', () => select(tab, false));
		tab.addEventListener('keydown', (e) => {
			const to = { ArrowRight: k + 1, ArrowLeft: k - 1, Home: 0, End: tabs.length - 1 }[e.key];
			if (to === undefined) return;
			e.preventDefault();
			select(tabs[(to + tabs.length) % tabs.length], true);
		});
	});
	const start = tabs.find((t) => `#${t.id.replace('tab-', '')}` === window.location.hash) || tabs[0];
	select(start, false);
}

function globalError(text) {
	const box = document.getElementById('global-error');
	box.textContent = text;
	box.hidden = false;
}

async function main() {
	let catalogue;
	try {
		catalogue = await getCatalogue();
	} catch (e) {
		globalError(`Cannot load the catalogue (GET /v1): ${e.detail || e.message}`);
		return;
	}
	document.getElementById('version').textContent = `posencd ${catalogue.version}`;
	const has = (name) => catalogue.tables.some((t) => t.name === name);
	const hasAlt = catalogue.tables.some((t) => !t.name.startsWith('analysis/') &&
		(t.params || []).some((p) => p.name === 'compat' && (p.choices || []).some((c) => c !== 'exact')));
	const views = {
		tables: new TablesView(catalogue),
		similarity: has('analysis/similarity') ? new SimilarityView(catalogue) : new MissingView('view-similarity', 'analysis/similarity'),
		decay: has('analysis/rope-decay') ? new DecayView(catalogue) : new MissingView('view-decay', 'analysis/rope-decay'),
		compat: hasAlt ? new CompatView(catalogue) : new MissingView('view-compat', 'a table with compat=hf'),
		mrope: has('rope/mrope') && has('rope/mrope/positions') ? new MropeView(catalogue) : new MissingView('view-mrope', 'rope/mrope'),
		order: has('analysis/order') ? new OrderView(catalogue) : new MissingView('view-order', 'analysis/order'),
		plan: new PlanView(),
		axial: has('rope/axial') && has('rope/axial/positions') ? new AxialView(catalogue) : new MissingView('view-axial', 'rope/axial'),
	};
	window.posencDashboard = views; /* for the console and the browser tests */
	setupTabs(views);
}

window.addEventListener('error', (e) => globalError(`Dashboard error: ${e.message}`));
window.addEventListener('unhandledrejection', (e) => globalError(`Dashboard error: ${e.reason && e.reason.message ? e.reason.message : e.reason}`));
main();
