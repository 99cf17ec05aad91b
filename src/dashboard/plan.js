/* posenc dashboard: the Model plan view. Paste a Hugging Face config.json (or drop the file on the
 * text box), and POST /v1/plan answers every positional encoding the model uses; they are listed
 * grouped by tower (text, vision, audio: one tbody each, headed by the tower's name), one row per
 * encoding: kind, layers, layer_indices, the canonical url, head_dim, rotary_dim, layout,
 * bias_scale (ALiBi), attention_scaling, softmax_scale, notes. Layers without a positional
 * encoding (kind none, NoPE) are rows too, with their layer indices. Each encoding with a table has
 * a Draw button that fetches its url (format=bin) and draws it below: a rank-1 table (a query
 * scale per position) as a line chart, a rank-2 or rank-3 one as a heatmap (one panel: cos, head 0).
 *
 * The positions asked for default to 256 here (the API's default is the model's whole context,
 * which can be millions of positions: too much to draw). The view follows the other views'
 * conventions: data-state (idle, loading, ready, error) and data-url (the last request: the plan's
 * POST, or the table drawn), and an API problem is shown with the key it names. */

import { ApiError, fetchTensor, formatValue } from './api.js';
import { el } from './controls.js';
import { Heatmap } from './heatmap.js';
import { LineChart } from './charts.js';
import { COLORMAPS } from './colormap.js';
import { showProblem } from './view.js';

const DRAW_LEN = 256;

async function postPlan(text, len) {
	const url = `/v1/plan?len=${encodeURIComponent(len)}`;
	let resp;
	try {
		resp = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: text });
	} catch (e) {
		throw new ApiError(0, { title: 'Network error', detail: `${url}: ${e.message}` }, url);
	}
	const body = await resp.json().catch(() => null);
	if (!resp.ok) throw new ApiError(resp.status, body, url);
	return { url, plan: body };
}

const fmt = (v) => (v === null || v === undefined ? '—' : typeof v === 'number' ? formatValue(v, 'f64') : String(v));
const layersText = (l) => (Array.isArray(l) ? (l.length > 12 ? `${l.length} layers: ${l.slice(0, 12).join(', ')}, …` : l.join(', ')) : l);
/* The layer indices of an encoding: layer_indices, or layers when the plan gives them as a list. */
const indicesOf = (e) => (Array.isArray(e.layer_indices) ? e.layer_indices : Array.isArray(e.layers) ? e.layers : null);
const TOWER_ORDER = ['text', 'vision', 'audio'];
/* Encodings grouped by tower: [[tower, [index, ...]], ...], known towers first, then any other in plan order. */
function byTower(encodings) {
	const groups = new Map();
	encodings.forEach((e, i) => {
		const t = e.tower || 'text';
		if (!groups.has(t)) groups.set(t, []);
		groups.get(t).push(i);
	});
	const rank = (t) => (TOWER_ORDER.includes(t) ? TOWER_ORDER.indexOf(t) : TOWER_ORDER.length);
	return [...groups].sort((a, b) => rank(a[0]) - rank(b[0]));
}
const COLUMNS = ['kind', 'layers', 'layer_indices', 'url', 'head_dim', 'rotary_dim', 'layout', 'bias_scale', 'attention_scaling', 'softmax_scale', 'notes', ''];
/* A table the dashboard can draw: a /v1/ table, not the learned tables' listing. */
/* A table the plan had to hand out as npy (its JSON would not fit the daemon's response limits) is
 * far too big to draw here: its row says so instead of offering a Draw button. */
const tooBigToDraw = (e) => /[?&]format=/.test(e.url || '');
const drawable = (e) => e.url && e.url.startsWith('/v1/') && e.kind !== 'learned' && !tooBigToDraw(e);

export class PlanView {
	constructor() {
		this.root = document.getElementById('view-plan');
		this.gen = 0;
		this.text = el('textarea', { id: 'plan-config', rows: 14, spellcheck: 'false', style: 'width: 100%; font-family: monospace', placeholder: '{"model_type": "llama", ...}  (paste config.json, or drop the file here)' });
		this.len = el('input', { id: 'plan-len', type: 'number', min: '1', value: String(DRAW_LEN) });
		this.status = el('span', { class: 'status', role: 'status' });
		this.controls = el('form', { class: 'controls', 'aria-label': 'Model plan: config', novalidate: true },
			el('h2', { text: 'Model plan' }),
			el('p', { class: 'summary', text: 'A Hugging Face config.json in, every positional encoding the model uses out (POST /v1/plan).' }),
			el('div', { class: 'field' }, el('label', { for: 'plan-config', text: 'config.json' }), this.text),
			el('div', { class: 'field' }, el('label', { for: 'plan-len', text: 'len (positions)' }), this.len),
			el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'primary', text: 'Plan' }), this.status));
		this.controls.addEventListener('submit', (e) => { e.preventDefault(); this.plan(); });
		this.text.addEventListener('dragover', (e) => e.preventDefault());
		this.text.addEventListener('drop', (e) => this.drop(e));
		this.error = el('div', { class: 'error', role: 'alert', hidden: true });
		this.table = el('table', { class: 'plan' });
		this.warnings = el('ul', { class: 'warnings' });
		this.caption = el('p', { class: 'caption' });
		this.wrap = el('div', { class: 'figwrap heat tall' });
		this.readout = el('p', { class: 'readout', 'aria-live': 'polite' });
		this.figure = el('figure', { class: 'fig tall', hidden: true }, this.wrap, this.readout);
		this.heat = new Heatmap(this.wrap, { label: 'encoding heatmap', readout: this.readout });
		this.lineWrap = el('div', { class: 'figwrap line medium' });
		this.lineReadout = el('p', { class: 'readout', 'aria-live': 'polite' });
		this.lineFigure = el('figure', { class: 'fig medium', hidden: true }, this.lineWrap, this.lineReadout);
		this.line = new LineChart(this.lineWrap, { label: 'encoding per position', readout: this.lineReadout });
		this.output = el('div', { class: 'output' }, this.error, this.table, this.warnings, this.caption, this.figure, this.lineFigure);
		this.root.append(this.controls, this.output);
	}

	show() {}

	async drop(e) {
		e.preventDefault();
		const f = e.dataTransfer && e.dataTransfer.files && e.dataTransfer.files[0];
		if (!f) return;
		this.text.value = await f.text();
		this.plan();
	}

	begin(text) {
		const gen = ++this.gen;
		this.root.dataset.state = 'loading';
		this.status.textContent = text;
		return gen;
	}

	fail(gen, e) {
		if (gen !== this.gen) return;
		showProblem(this.error, e, null);
		this.error.hidden = false;
		this.root.dataset.state = 'error';
		this.status.textContent = '';
	}

	async plan() {
		const gen = this.begin('Planning…');
		try {
			const { url, plan } = await postPlan(this.text.value, this.len.value || DRAW_LEN);
			if (gen !== this.gen) return;
			this.last = plan;
			this.render(plan);
			this.error.hidden = true;
			this.figure.hidden = true;
			this.lineFigure.hidden = true;
			this.root.dataset.url = url;
			this.root.dataset.state = 'ready';
			this.status.textContent = '';
		} catch (e) {
			this.fail(gen, e);
		}
	}

	render(plan) {
		const head = el('tr', {}, ...COLUMNS.map((h) => el('th', { scope: 'col', 'data-field': h, text: h.replace(/_/g, ' ') })));
		const groups = byTower(plan.encodings).map(([tower, idx]) => el('tbody', { 'data-tower': tower },
			el('tr', { class: 'tower' }, el('th', { scope: 'rowgroup', colspan: String(COLUMNS.length), text: `${tower} tower: ${idx.length} encoding(s)` })),
			...idx.map((i) => this.row(plan.encodings[i], i))));
		const towers = groups.length > 1 ? `, ${groups.length} towers` : '';
		this.table.replaceChildren(el('caption', { text: `${plan.model_type}: ${plan.encodings.length} encoding(s)${towers}` }),
			el('thead', {}, head), ...groups);
		this.warnings.replaceChildren(...(plan.warnings || []).map((w) => el('li', { text: `warning: ${w}` })));
		this.caption.textContent = '';
	}

	/* One encoding's row; data-index is its index in the plan's encodings. */
	row(e, i) {
		let draw;
		if (drawable(e)) {
			draw = el('button', { type: 'button', class: 'draw', 'data-index': String(i), text: 'Draw' });
			draw.addEventListener('click', () => this.draw(i));
		} else {
			draw = el('span', { class: 'too-big', text: tooBigToDraw(e) ? 'too large to draw: fetch it with NumPy' : e.kind === 'none' ? 'no positional encoding' : '' });
		}
		const ids = indicesOf(e);
		return el('tr', { class: `enc kind-${e.kind.replace(/[^a-z0-9]+/gi, '-')}`, 'data-index': String(i), 'data-tower': e.tower || 'text' },
			el('td', { text: e.kind }), el('td', { text: Array.isArray(e.layers) ? `${e.layers.length} layers` : fmt(e.layers) }),
			el('td', { class: 'layer-indices', 'data-values': ids ? ids.join(',') : '', text: ids ? layersText(ids) : '—' }),
			el('td', { class: 'url' }, e.url ? el('code', { text: e.url }) : el('span', { text: '—' })),
			el('td', { text: fmt(e.head_dim) }), el('td', { text: fmt(e.rotary_dim) }), el('td', { text: fmt(e.layout) }),
			el('td', { text: fmt(e.bias_scale) }),
			el('td', { text: fmt(e.attention_scaling) }), el('td', { text: fmt(e.softmax_scale) }),
			el('td', { class: 'notes', text: (e.notes || []).join(' · ') }), el('td', {}, draw));
	}

	async draw(i) {
		const e = this.last.encodings[i];
		const url = `${e.url}&format=bin`;
		const gen = this.begin('Loading…');
		try {
			const t = await fetchTensor(url);
			if (gen !== this.gen) return;
			const s = t.shape, rank = s.length;
			const where = layersText(indicesOf(e) || e.layers);
			this.figure.hidden = rank < 2;
			this.lineFigure.hidden = rank >= 2;
			if (rank < 2) {
				this.line.show({
					series: [{ y: t.data, label: e.kind }], xLabel: 'position', yLabel: e.kind === 'query_scale' ? 'query scale' : 'value',
					title: `${e.kind} (${where}) [${s.join(' × ')}]`, format: (v) => formatValue(v, t.dtype),
				});
			} else this.heat.show({
				data: t.data, dtype: t.dtype, rows: rank >= 2 ? s[rank - 2] : 1, cols: s[rank - 1], panels: rank === 3 ? s[0] : 1,
				panelNames: rank === 3 ? Array.from({ length: s[0] }, (_, k) => (e.kind.endsWith('rope') ? ['cos', 'sin'][k] : `head ${k}`)) : ['table'],
				panel: 0, yName: e.kind === 'sinusoidal2d' ? 'patch' : 'position', xName: e.kind === 'alibi' || e.kind === 'relative/t5' ? 'key' : 'dimension',
				rowValue: (r) => r, colValue: (c) => c, title: `${e.kind} (${where}) [${s.join(' × ')}]`,
				cmap: COLORMAPS.viridis, square: false, format: (v) => formatValue(v, t.dtype),
			});
			this.caption.textContent = `${e.kind} (${e.tower || 'text'} tower), layers ${where}: ${url}`;
			this.error.hidden = true;
			this.root.dataset.url = url;
			this.root.dataset.state = 'ready';
			this.status.textContent = '';
		} catch (err) {
			this.fail(gen, err);
		}
	}
}
