/* posenc dashboard: the M-RoPE view (Qwen2-VL, Qwen2.5-VL, Qwen3-VL).
 *
 * For a text+image+video sequence (the `segments` of /v1/rope/mrope) it draws:
 *   - the sequence itself, one cell per token coloured by its segment's kind;
 *   - the three position rows t, h, w of /v1/rope/mrope/positions against the token index, where
 *     text advances all three together and a vision block holds t while h and w sweep its grid;
 *   - which rotary frequency follows which row (mrope_section, in order or interleaved as Qwen3-VL),
 *     one cell per frequency k < dim/2 coloured by its row;
 *   - the cos plane of /v1/rope/mrope after the section split, token × channel.
 * The section map is the rule transformers applies (apply_multimodal_rotary_pos_emb's split of
 * cat(freqs, freqs) into mrope_section * 2 chunks, or apply_interleaved_mrope); the server checks
 * the same parameters, and its problem, naming the parameter, is shown instead of a figure.
 *
 * As every view: format=bin requests to the same origin, data-state (idle, loading, ready, error)
 * and data-url on the view element, curl/Python snippets for exactly what is drawn. The strips
 * publish what they draw as data-values (comma-separated) for the browser tests. */

import { buildUrl, fetchTensor, formatValue } from './api.js';
import { buildForm, el } from './controls.js';
import { Heatmap } from './heatmap.js';
import { LineChart, SERIES_COLORS, FONT, INK, sizedContext } from './charts.js';
import { COLORMAPS } from './colormap.js';
import { curlText, pythonText, snippetBox } from './snippets.js';
import { settleError, settleReady } from './view.js';

export const ROW_NAMES = ['t', 'h', 'w'];
const KIND_NAMES = ['text', 'image', 'video'];
const KIND_COLORS = ['#c9ced8', '#2e8b57', '#8a5cc2'];

/* The row (0 t, 1 h, 2 w) frequency k follows, for sections sec = [t, h, w]. */
export function rowOf(sec, interleaved, k) {
	if (interleaved) {
		if (k % 3 === 1 && k < 3 * sec[1]) return 1;
		if (k % 3 === 2 && k < 3 * sec[2]) return 2;
		return 0;
	}
	return k < sec[0] ? 0 : k < sec[0] + sec[1] ? 1 : 2;
}

/* Kind (0 text, 1 image, 2 video) of every token of a segments text, or null when it does not parse
 * (the server then says why). stamps (variant=qwen3vl or glm4v: timestamp_tokens, one value or one
 * per frame) lays each video out as frames: Qwen3-VL's processor writes per frame its timestamp
 * text and <|vision_start|>, the frame's tokens, <|vision_end|>; with stampAfter (glm4v),
 * GLM-4.1V's <|begin_of_image|>, the frame's tokens, <|end_of_image|> and the timestamp text. */
export function tokenKinds(segments, merge, stamps = null, stampAfter = false) {
	const out = [];
	let frame = 0;
	for (const s of segments.split(',')) {
		const m = /^(text|image|video):(\d+)(?:x(\d+)x(\d+))?$/.exec(s);
		if (!m || (m[1] === 'text') !== (m[3] === undefined)) return null;
		const kind = KIND_NAMES.indexOf(m[1]);
		if (kind === 2 && stamps) {
			const hw = Math.floor(Number(m[3]) / merge) * Math.floor(Number(m[4]) / merge);
			for (let f = 0; f < Number(m[2]); f++, frame++) {
				const stamp = stamps.length === 1 ? stamps[0] : stamps[frame] ?? 0;
				const lead = stampAfter ? 1 : stamp + 1, len = stamp + 2 + hw;
				if (out.length + len > 1 << 22) return null;
				for (let i = 0; i < len; i++) out.push(i >= lead && i < lead + hw ? 2 : 0);
			}
			continue;
		}
		const n = kind === 0 ? Number(m[2]) : Number(m[2]) * Math.floor(Number(m[3]) / merge) * Math.floor(Number(m[4]) / merge);
		if (out.length + n > 1 << 22) return null;
		for (let i = 0; i < n; i++) out.push(kind);
	}
	return out;
}

/* A strip of coloured cells with a legend: one cell per value. */
export class Strip {
	constructor(label) {
		this.canvas = el('canvas', { class: 'strip', role: 'img', 'aria-label': label, height: '34' });
		this.legend = el('p', { class: 'readout' });
		this.box = el('figure', { class: 'fig' }, el('div', { class: 'stripwrap', style: 'position: relative; width: 100%; height: 34px' }, this.canvas), this.legend);
	}

	draw(values, colors, names, title) {
		const c = this.canvas, w = Math.max(100, c.parentElement.clientWidth || 800), h = 34;
		const g = sizedContext(c, w, h);
		const n = values.length, top = 16, cell = w / Math.max(1, n);
		for (let i = 0; i < n; i++) {
			g.fillStyle = colors[values[i]];
			g.fillRect(Math.floor(i * cell), top, Math.max(1, Math.ceil((i + 1) * cell) - Math.floor(i * cell)), h - top);
		}
		g.fillStyle = INK;
		g.font = FONT;
		g.textBaseline = 'top';
		g.fillText(title, 0, 1);
		c.dataset.values = values.join(',');
		this.legend.replaceChildren(...names.map((name, k) => el('span', { class: 'key' },
			el('span', { text: '■ ', style: `color: ${colors[k]}` }), `${name} ${values.filter((v) => v === k).length}  `)));
	}
}

export class MropeView {
	constructor(catalogue) {
		this.root = document.getElementById('view-mrope');
		this.table = catalogue.tables.find((t) => t.name === 'rope/mrope');
		this.positions = catalogue.tables.find((t) => t.name === 'rope/mrope/positions');
		this.gen = 0;
		this.loaded = false;
		this.controls = el('form', { class: 'controls', 'aria-label': 'M-RoPE: parameters', novalidate: true });
		this.controls.addEventListener('submit', (e) => { e.preventDefault(); this.refresh(); });
		this.formBox = el('div', { class: 'params' });
		this.status = el('span', { class: 'status', role: 'status' });
		this.controls.append(el('h2', { text: 'M-RoPE' }),
			el('p', { class: 'summary', text: 'Multimodal RoPE: every token has three positions (t, h, w); each rotary frequency turns with one of them. Text moves all three together; an image holds t while h and w sweep its grid. Qwen3-VL (variant qwen3vl) gives each video frame its own block behind its timestamp text (timestamp_tokens); GLM-4.1V (glm4v) puts the timestamp after the frame.' }),
			this.formBox, el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'primary', text: 'Draw' }), this.status));
		this.form = buildForm(this.formBox, this.table, {
			initial: { segments: 'text:4,image:1x8x8,text:2,video:3x8x8,text:3', dim: '32', mrope_section: '4,6,6' },
			onChange: () => this.schedule(),
		});
		this.error = el('div', { class: 'error', role: 'alert', hidden: true });
		this.figures = el('div', { class: 'figures' });
		this.kinds = new Strip('the sequence: one cell per token, by kind');
		this.sections = new Strip('which position row each frequency follows');
		const lw = el('div', { class: 'figwrap medium' }), lr = el('p', { class: 'readout', 'aria-live': 'polite' });
		this.rows = new LineChart(lw, { label: 'position rows t, h, w per token', readout: lr });
		const hw = el('div', { class: 'figwrap medium' }), hr = el('p', { class: 'readout', 'aria-live': 'polite' });
		this.heat = new Heatmap(hw, { label: 'cos after the section split', readout: hr });
		this.figures.append(this.kinds.box, el('figure', { class: 'fig' }, lw, lr), this.sections.box, el('figure', { class: 'fig' }, hw, hr));
		this.caption = el('p', { class: 'caption' });
		this.snip = snippetBox('Reproduce this figure');
		this.output = el('div', { class: 'output' }, this.error, this.figures, this.caption, this.snip.root);
		this.root.append(this.controls, this.output);
	}

	show() {
		if (!this.loaded) { this.loaded = true; this.refresh(); }
	}

	schedule(delay = 300) {
		clearTimeout(this.timer);
		this.timer = setTimeout(() => this.refresh(), delay);
	}

	requests() {
		const pairs = this.form.pairs();
		const seqNames = this.positions.params.map((p) => p.name);
		return [
			{ url: buildUrl(this.positions.path, [...pairs.filter(([n]) => seqNames.includes(n)), ['format', 'bin']]), file: 'mrope_positions.npy', name: 'positions' },
			{ url: buildUrl(this.table.path, [...pairs, ['format', 'bin']]), file: 'mrope.npy', name: 'cos_sin' },
		];
	}

	async refresh() {
		clearTimeout(this.timer);
		const gen = ++this.gen;
		this.root.dataset.state = 'loading';
		this.status.textContent = 'Loading…';
		try {
			const requests = this.requests();
			const [pos, table] = await Promise.all(requests.map((q) => fetchTensor(q.url)));
			if (gen !== this.gen) return;
			this.present(pos, table);
			this.snip.set(curlText(requests), pythonText(requests, ['t, h, w = positions', 'cos, sin = cos_sin']));
			settleReady(this, requests.map((q) => q.url).join(' '));
		} catch (e) {
			if (gen !== this.gen) return;
			settleError(this, e, this.form);
		}
		this.status.textContent = '';
	}

	present(pos, table) {
		const seq = pos.shape[1], dim = table.shape[2], half = dim / 2;
		if (table.shape[1] !== seq) throw new Error(`the table has ${table.shape[1]} tokens, the positions ${seq}`);
		const rowsOf = (r) => Float64Array.from(pos.data.subarray(r * seq, (r + 1) * seq));
		let max = 0;
		for (const v of pos.data) max = Math.max(max, v);
		const variant = this.form.value('variant'), framed = variant === 'qwen3vl' || variant === 'glm4v';
		const stamps = framed && this.form.value('timestamp_tokens')
			? this.form.value('timestamp_tokens').split(',').map(Number) : null;
		const kinds = tokenKinds(this.form.value('segments'), Number(this.form.value('spatial_merge_size')), stamps,
			variant === 'glm4v');
		if (kinds && kinds.length === seq) this.kinds.draw(kinds, KIND_COLORS, KIND_NAMES, `the sequence: ${seq} tokens`);
		this.rows.show({
			x: Float64Array.from({ length: seq }, (_, i) => i),
			series: ROW_NAMES.map((n, r) => ({ y: rowsOf(r), label: n })),
			xLabel: 'token', yLabel: 'position', title: 'position rows t, h, w', format: (x) => formatValue(x, 'i32'),
		});
		const sec = this.form.value('mrope_section').split(',').map(Number), inter = this.form.value('interleaved') === '1';
		const map = Array.from({ length: half }, (_, k) => rowOf(sec, inter, k));
		this.sections.draw(map, SERIES_COLORS, ROW_NAMES.map((n) => `${n}:`),
			`frequency k = 0 … ${half - 1} (channels k and k + ${half}): ${inter ? 'interleaved (Qwen3-VL)' : 'in order (Qwen2-VL)'}`);
		this.heat.show({
			data: table.data, dtype: table.dtype, rows: seq, cols: dim, panels: 2, panelNames: ['cos', 'sin'], panel: 0,
			yName: 'token', xName: 'channel', rowValue: (i) => i, colValue: (j) => j,
			title: `cos after the section split [${seq} × ${dim}]`, cmap: COLORMAPS.RdBu, format: (x) => formatValue(x, table.dtype),
		});
		const delta = max + 1 - seq;
		this.root.dataset.delta = String(delta);
		this.caption.textContent = `${seq} tokens, largest position ${max}: mrope_position_delta = ${delta}.` +
			(table.attentionScaling !== null && table.attentionScaling !== 1 ? ` attention_scaling ${table.attentionScaling} (applied).` : '');
	}
}
