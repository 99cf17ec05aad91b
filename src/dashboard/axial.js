/* posenc dashboard: the axial RoPE view (FLUX, HunyuanVideo, Wan, CogVideoX, Qwen-Image).
 *
 * For a preset and a token grid (H×W for an image, T×H×W for a video; text tokens, when the preset
 * has them, come first) it draws:
 *   - the position ids of /v1/rope/axial/positions, one block per axis: the text tokens as a strip,
 *     then each frame's H×W grid of tokens, every cell coloured by its id on that axis (viridis over
 *     that axis' own range);
 *   - the channel bands of the head: which channels each axis rotates, axes_dim in axis order,
 *     one cell per channel coloured by its axis;
 *   - the cos plane of /v1/rope/axial, token × channel.
 * axes_dim is read back from the table's own JSON answer for a one-token grid (the preset's value,
 * or the one given), so the bands are the server's and not a copy of its presets.
 *
 * The skeleton (fetching, data-state and data-url, snippets, problems) is view.js's. The id grid
 * publishes its layout and the ids it drew as data- attributes for the browser tests. */

import { buildUrl, formatValue } from './api.js';
import { buildForm, el } from './controls.js';
import { SERIES_COLORS, FONT, INK, sizedContext } from './charts.js';
import { COLORMAPS, colorOf } from './colormap.js';
import { View } from './view.js';
import { Strip } from './mrope.js';

export const AXIS_NAMES = ['axis 0 (frame)', 'axis 1 (row)', 'axis 2 (column)'];
const axisName = (a) => AXIS_NAMES[a] || `axis ${a}`;
const MAX_FRAMES = 8; /* frames drawn side by side; a longer video shows its first ones */
const BAND = 64; /* CSS pixels per axis block */

/* [T, H, W] of a grid text ("HxW" or "TxHxW"), or null. */
export function gridDims(text) {
	const d = String(text || '').split('x').map(Number);
	if ((d.length !== 2 && d.length !== 3) || d.some((v) => !Number.isInteger(v) || v < 1)) return null;
	return d.length === 2 ? [1, d[0], d[1]] : d;
}

/* The position ids, one block per axis: text strip, then the frames' token grids. */
class IdGrid {
	constructor(label) {
		this.canvas = el('canvas', { class: 'idgrid', role: 'img', 'aria-label': label });
		this.legend = el('p', { class: 'readout' });
		this.wrap = el('div', { style: 'position: relative; width: 100%' }, this.canvas);
		this.box = el('figure', { class: 'fig' }, this.wrap, this.legend);
	}

	/* ids: Float32Array [S, n] row-major; dims [T, H, W]; text: tokens before the grid. */
	draw(ids, n, dims, text) {
		const [T, H, W] = dims, frames = Math.min(T, MAX_FRAMES), S = ids.length / n;
		const w = Math.max(200, this.wrap.clientWidth || 800);
		const left = 120, gap = 8, head = 16, textRow = text > 0 ? 14 : 0;
		const cell = Math.max(1, Math.min((w - left - gap * frames) / (frames * W), (BAND - 4) / H));
		const blockH = head + textRow + Math.ceil(cell * H) + 10, h = n * blockH;
		const c = this.canvas, g = sizedContext(c, w, h);
		g.font = FONT;
		g.textBaseline = 'top';
		const cmap = COLORMAPS.viridis, ranges = [], boxes = [];
		for (let a = 0; a < n; a++) {
			let lo = Infinity, hi = -Infinity;
			for (let s = 0; s < S; s++) { const v = ids[s * n + a]; if (v < lo) lo = v; if (v > hi) hi = v; }
			ranges.push([lo, hi]);
			const y0 = a * blockH;
			g.fillStyle = INK;
			g.fillText(axisName(a), 0, y0 + head + textRow);
			g.fillText(`ids ${formatValue(lo, 'f32')} … ${formatValue(hi, 'f32')}`, 0, y0 + head + textRow + 14);
			const paint = (s, x, y, cw, ch) => {
				const [r, gg, b] = colorOf(cmap, ids[s * n + a], lo, hi);
				g.fillStyle = `rgb(${r},${gg},${b})`;
				g.fillRect(x, y, cw, ch);
			};
			const tw = text > 0 ? Math.min(10, (w - left) / text) : 0;
			for (let s = 0; s < text; s++) paint(s, left + s * tw, y0 + head, Math.max(1, tw - (tw > 3 ? 1 : 0)), textRow - 2);
			if (text > 0) { g.fillStyle = INK; g.fillText(`← ${text} text token(s)`, left + text * tw + 6, y0 + head); }
			const gy = y0 + head + textRow;
			for (let f = 0; f < frames; f++) {
				const fx = left + f * (W * cell + gap);
				if (a === 0) { g.fillStyle = INK; g.fillText(T > 1 ? `frame ${f}` : 'image', fx, 2); }
				for (let r = 0; r < H; r++)
					for (let q = 0; q < W; q++) paint(text + (f * H + r) * W + q, fx + q * cell, gy + r * cell, Math.ceil(cell), Math.ceil(cell));
			}
			boxes.push([left, gy, cell, W * cell + gap, left, y0 + head, tw]);
		}
		Object.assign(c.dataset, {
			axes: String(n), frames: String(frames), rows: String(H), cols: String(W), text: String(text),
			boxes: JSON.stringify(boxes), ranges: JSON.stringify(ranges),
			ids: Array.from(ids.subarray(0, S * n), (v) => String(v)).join(','),
		});
		this.legend.textContent = `${S} tokens: ${text} text, ${T} × ${H} × ${W} grid${T > MAX_FRAMES ? ` (first ${MAX_FRAMES} frames drawn)` : ''}. ` +
			'Each axis has its own colour scale (viridis, lowest id dark).';
	}
}

export class AxialView extends View {
	constructor(catalogue) {
		super('view-axial', 'Axial RoPE');
		this.table = catalogue.tables.find((t) => t.name === 'rope/axial');
		this.positions = catalogue.tables.find((t) => t.name === 'rope/axial/positions');
		this.formBox = el('div', { class: 'params' });
		this.controls.append(el('h2', { text: 'Axial RoPE' }),
			el('p', { class: 'summary', text: 'Image and video diffusion transformers give every token one position per axis (frame, row, column) and cut the head\'s channels into one band per axis (axes_dim): each band turns by its axis\' position only.' }),
			this.formBox, this.submitRow());
		this.form = buildForm(this.formBox, this.table, {
			initial: { preset: 'flux', grid: '8x8', text_tokens: '4' },
			onChange: () => this.schedule(),
		});
		this.ids = new IdGrid('position ids of every token, one block per axis');
		this.bands = new Strip('which axis each channel of the head follows');
		this.figures.append(this.ids.box, this.bands.box);
		this.heat = this.figureBox('heat', 'axial RoPE cos, token by channel', 'medium');
	}

	/* The ids and the table, drawn; and the table's JSON for one token of the same rank, whose
	 * params say the axes_dim it used (the preset's, or the one given). */
	requests() {
		const pairs = this.form.pairs();
		const posNames = this.positions.params.map((p) => p.name);
		const one = this.form.value('grid').split('x').length === 3 ? '1x1x1' : '1x1';
		const perToken = pairs.filter(([n]) => !['grid', 'text_tokens', 'base_width', 'base_height'].includes(n));
		return [
			{ url: buildUrl(this.positions.path, [...pairs.filter(([n]) => posNames.includes(n)), ['format', 'bin']]), file: 'axial_ids.npy', name: 'ids' },
			{ url: buildUrl(this.table.path, [...pairs, ['format', 'bin']]), file: 'axial.npy', name: 'cos_sin' },
			{ url: buildUrl(this.table.path, [...perToken, ['grid', one]]), json: true },
		];
	}

	combine() {
		return ['cos, sin = cos_sin'];
	}

	present([ids, table], _requests, [oneToken]) {
		const axes = oneToken.params.axes_dim;
		const S = ids.shape[0], n = ids.shape[1], D = table.shape[2];
		const dims = gridDims(this.form.value('grid'));
		if (!dims) throw new Error(`grid ${this.form.value('grid')} is not HxW or TxHxW`);
		const text = S - dims[0] * dims[1] * dims[2];
		if (table.shape[1] !== S) throw new Error(`the table has ${table.shape[1]} tokens, the ids ${S}`);
		if (axes.length !== n || axes.reduce((x, y) => x + y, 0) !== D) throw new Error(`axes_dim ${axes} does not match ${n} axes and ${D} channels`);
		this.ids.draw(ids.data, n, dims, text);
		const band = [];
		axes.forEach((d, a) => { for (let k = 0; k < d; k++) band.push(a); });
		this.bands.draw(band, SERIES_COLORS, axes.map((d, a) => `${axisName(a)}:`), `channel 0 … ${D - 1}: axes_dim ${axes.join(', ')}`);
		this.heat.fig.show({
			data: table.data, dtype: table.dtype, rows: S, cols: D, panels: 2, panelNames: ['cos', 'sin'], panel: 0,
			yName: 'token', xName: 'channel', rowValue: (i) => i, colValue: (j) => j,
			title: `cos [${S} × ${D}]`, cmap: COLORMAPS.RdBu, format: (x) => formatValue(x, table.dtype),
		});
		let off = 0;
		const spans = axes.map((d, a) => { const s = `${axisName(a)}: channels ${off}–${off + d - 1}`; off += d; return s; });
		this.root.dataset.axes = axes.join(',');
		this.caption.textContent = `${S} tokens (${text} text), ${D} channels. ${spans.join('; ')}.`;
	}
}
