/* posenc dashboard: heatmaps of tables, drawn pixel by pixel from the binary data.
 *
 * Picture as the seeds' `plt.pcolormesh(pe, cmap='viridis'); plt.colorbar()`, with the PNG
 * writer's conventions (src/tensor/png.h): x = the last axis (embedding dimension, key), y = the
 * one before (position, query), row 0 at the TOP as an image is read; a colour bar on the right
 * with the range. Rank-3 tables ([2, len, dim] cos/sin, ALiBi [heads, q, k]) show one panel
 * picked by the caller, or every panel in a grid (up to MAX_GRID) sharing one colour scale; the
 * scale always spans the whole table, so switching panels never changes what a colour means.
 *
 * The image is computed at the plot's device-pixel size, not scaled by the browser: pixel x of a
 * w-pixel plot shows column floor(x * cols / w) when cells are wider than a pixel, and the mean of
 * the finite, unmasked cells it covers when they are narrower (striding would alias the fast
 * sinusoid columns into false stripes). So a pixel at a cell's centre has exactly that cell's
 * colour — which is what the browser tests check. The canvas publishes data-boxes, the
 * [panel, x, y, w, h] of every panel drawn (CSS pixels), beside Figure's data-plot (the first). */

import { FONT, INK, Figure, niceTicks, fmtTick, esc } from './charts.js';
import { isBad, valueRange, colorOf, BAD } from './colormap.js';

export const MAX_GRID = 16;

export class Heatmap extends Figure {
	constructor(wrap, opts) {
		super(wrap, opts);
		this.cur = null; /* {p, r, c}: the cursor cell */
	}

	/* spec: {data, dtype, rows, cols, panels, panelNames, panel (-1: grid of all), yName, xName,
	 * rowValue(i), colValue(j), title, cmap, square, format(v)} */
	show(spec) {
		this.spec = spec;
		const range = spec.range || valueRange(spec.data, spec.cmap);
		this.lo = range.lo;
		this.hi = range.hi;
		this.shown = spec.panel >= 0 || spec.panels === 1 ? [Math.max(0, spec.panel)] : Array.from({ length: Math.min(spec.panels, MAX_GRID) }, (_, i) => i);
		this.hasMasked = false;
		for (let i = 0; i < spec.data.length; i++) if (isBad(spec.data[i])) { this.hasMasked = true; break; }
		if (this.cur && (this.cur.r >= spec.rows || this.cur.c >= spec.cols || !this.shown.includes(this.cur.p))) this.cur = null;
		this.ready = spec.rows > 0 && spec.cols > 0;
		this.canvas.setAttribute('aria-label', `${spec.title}: heatmap of ${spec.rows} ${spec.yName} by ${spec.cols} ${spec.xName}; arrow keys read values`);
		this.render();
	}

	/* Where each shown panel goes: [{p, x, y, w, h}] in CSS pixels, integers. */
	layout(w, h, ctx) {
		const s = this.spec;
		ctx.font = FONT;
		const label = (i) => ctx.measureText(fmtTick(s.rowValue(i))).width;
		const m = { l: Math.max(74, Math.ceil(Math.max(label(0), label(s.rows - 1))) + 40), r: 96, t: 30, b: 46 };
		const n = this.shown.length;
		const gc = n <= 4 ? n : Math.ceil(Math.sqrt(n)), gr = Math.ceil(n / gc);
		const gap = n > 1 ? 10 : 0, strip = n > 1 ? 16 : 0;
		let W = w - m.l - m.r, H = h - m.t - m.b;
		let pw = Math.floor((W - gap * (gc - 1)) / gc), ph = Math.floor((H - (gap + strip) * gr + gap) / gr);
		if (this.spec.square) pw = ph = Math.min(pw, ph);
		const boxes = this.shown.map((p, k) => ({
			p, x: m.l + (k % gc) * (pw + gap), y: m.t + strip + Math.floor(k / gc) * (ph + gap + strip), w: pw, h: ph,
		}));
		W = gc * pw + (gc - 1) * gap;
		H = gr * (ph + strip) + (gr - 1) * gap;
		return { m, boxes, W, H, gc, gr };
	}

	draw(ctx, w, h, dpr) {
		if (!this.ready) return;
		const s = this.spec;
		const L = (this.L = this.layout(w, h, ctx));
		const b0 = L.boxes[0];
		Object.assign(this.canvas.dataset, {
			plot: [b0.x, b0.y, b0.w, b0.h].join(','), lo: this.lo, hi: this.hi, rows: s.rows, cols: s.cols,
			panel: s.panel, cmap: s.cmap.name, boxes: JSON.stringify(L.boxes.map((b) => [b.p, b.x, b.y, b.w, b.h])),
		});
		for (const b of L.boxes) this.paintPanel(ctx, b, dpr);
		ctx.font = FONT;
		ctx.fillStyle = INK;
		ctx.strokeStyle = INK;
		/* panel labels */
		if (L.boxes.length > 1) {
			ctx.textAlign = 'left';
			ctx.textBaseline = 'bottom';
			for (const b of L.boxes) ctx.fillText(s.panelNames[b.p], b.x, b.y - 3);
		}
		/* y ticks on the first column of panels, x ticks under the last row */
		const rowTicks = niceTicks(0, s.rows - 1, Math.max(2, Math.floor(b0.h / 44)), true);
		const colTicks = niceTicks(0, s.cols - 1, Math.max(2, Math.floor(b0.w / 70)), true);
		for (const b of L.boxes) {
			ctx.strokeRect(b.x - 0.5, b.y - 0.5, b.w + 1, b.h + 1);
			const k = L.boxes.indexOf(b);
			if (k % L.gc === 0) {
				ctx.textAlign = 'right';
				ctx.textBaseline = 'middle';
				for (const r of rowTicks) {
					const y = Math.round(b.y + (r + 0.5) * b.h / s.rows) + 0.5;
					ctx.beginPath(); ctx.moveTo(b.x - 5, y); ctx.lineTo(b.x - 1, y); ctx.stroke();
					ctx.fillText(fmtTick(s.rowValue(r)), b.x - 7, y);
				}
			}
			if (k >= L.boxes.length - L.gc) {
				ctx.textAlign = 'center';
				ctx.textBaseline = 'top';
				for (const c of colTicks) {
					const x = Math.round(b.x + (c + 0.5) * b.w / s.cols) + 0.5;
					ctx.beginPath(); ctx.moveTo(x, b.y + b.h + 1); ctx.lineTo(x, b.y + b.h + 5); ctx.stroke();
					ctx.fillText(fmtTick(s.colValue(c)), x, b.y + b.h + 7);
				}
			}
		}
		/* axis names and title */
		const top = L.boxes[0].y - (L.boxes.length > 1 ? 16 : 0);
		ctx.textAlign = 'center';
		ctx.textBaseline = 'alphabetic';
		ctx.fillText(s.xName, L.m.l + L.W / 2, top + L.H + 40);
		ctx.save();
		ctx.translate(16, top + L.H / 2);
		ctx.rotate(-Math.PI / 2);
		ctx.textBaseline = 'middle';
		ctx.fillText(s.yName, 0, 0);
		ctx.restore();
		ctx.font = `600 ${FONT}`;
		ctx.textAlign = 'left';
		ctx.textBaseline = 'top';
		ctx.fillText(s.title, L.m.l, 8);
		this.paintColorbar(ctx, L.m.l + L.W + 18, top, Math.min(L.H, 420), dpr);
	}

	/* The panel's image at device resolution, written with putImageData. */
	paintPanel(ctx, b, dpr) {
		const s = this.spec, { rows, cols, data, cmap } = s;
		const W = Math.round(b.w * dpr), H = Math.round(b.h * dpr);
		if (W <= 0 || H <= 0) return;
		const img = ctx.createImageData(W, H), px = img.data;
		const base = b.p * rows * cols;
		const c0 = new Int32Array(W + 1), r0 = new Int32Array(H + 1);
		for (let x = 0; x <= W; x++) c0[x] = Math.min(cols, Math.floor(x * cols / W));
		for (let y = 0; y <= H; y++) r0[y] = Math.min(rows, Math.floor(y * rows / H));
		for (let y = 0; y < H; y++) {
			const ra = r0[y], rb = Math.max(ra + 1, r0[y + 1]);
			for (let x = 0; x < W; x++) {
				const ca = c0[x], cb = Math.max(ca + 1, c0[x + 1]);
				let v;
				if (rb - ra === 1 && cb - ca === 1) v = data[base + ra * cols + ca];
				else {
					let sum = 0, n = 0;
					for (let r = ra; r < rb; r++)
						for (let c = ca; c < cb; c++) {
							const u = data[base + r * cols + c];
							if (!isBad(u)) { sum += u; n++; }
						}
					v = n ? sum / n : NaN;
				}
				const rgb = colorOf(cmap, v, this.lo, this.hi), o = 4 * (y * W + x);
				px[o] = rgb[0]; px[o + 1] = rgb[1]; px[o + 2] = rgb[2]; px[o + 3] = 255;
			}
		}
		ctx.putImageData(img, Math.round(b.x * dpr), Math.round(b.y * dpr));
	}

	paintColorbar(ctx, x, y, h, dpr) {
		const s = this.spec, cm = s.cmap, bw = 16;
		const img = ctx.createImageData(Math.round(bw * dpr), Math.round(h * dpr));
		const H = img.height, W = img.width;
		for (let j = 0; j < H; j++) {
			const v = this.hi - (j + 0.5) / H * (this.hi - this.lo);
			const rgb = colorOf(cm, v, this.lo, this.hi);
			for (let i = 0; i < W; i++) {
				const o = 4 * (j * W + i);
				img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
			}
		}
		ctx.putImageData(img, Math.round(x * dpr), Math.round(y * dpr));
		ctx.font = FONT;
		ctx.fillStyle = INK;
		ctx.strokeStyle = INK;
		ctx.strokeRect(x - 0.5, y - 0.5, bw + 1, h + 1);
		ctx.textAlign = 'left';
		ctx.textBaseline = 'middle';
		const ticks = this.hi > this.lo ? niceTicks(this.lo, this.hi, Math.max(2, Math.floor(h / 60))) : [this.lo];
		const ypos = (v) => (this.hi > this.lo ? y + (this.hi - v) / (this.hi - this.lo) * h : y + h / 2);
		for (const v of ticks) {
			const ty = Math.round(ypos(v)) + 0.5;
			ctx.beginPath(); ctx.moveTo(x + bw, ty); ctx.lineTo(x + bw + 4, ty); ctx.stroke();
			ctx.fillText(fmtTick(v), x + bw + 6, ty);
		}
		this.canvas.dataset.colorbar = [x, y, bw, h].join(',');
		if (this.hasMasked) {
			ctx.fillStyle = `rgb(${BAD.join(',')})`;
			ctx.fillRect(x, y + h + 10, bw, 10);
			ctx.fillStyle = INK;
			ctx.fillText('masked', x + bw + 6, y + h + 15);
		}
	}

	/* The cell under (x, y) in CSS pixels, or null. */
	cellAt(x, y) {
		if (!this.L) return null;
		const s = this.spec;
		for (const b of this.L.boxes)
			if (x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + b.h)
				return { p: b.p, r: Math.min(s.rows - 1, Math.floor((y - b.y) * s.rows / b.h)), c: Math.min(s.cols - 1, Math.floor((x - b.x) * s.cols / b.w)) };
		return null;
	}

	hasCursor() { return this.cur !== null; }

	hover(x, y, showTip) {
		if (!this.ready) return;
		const cell = this.cellAt(x, y);
		if (!cell) { this.tip.hidden = true; return; }
		this.setCursor(cell, showTip, x, y);
	}

	moveCursor(dc, dr, where) {
		const s = this.spec;
		let { p, r, c } = this.cur || { p: this.shown[0], r: 0, c: 0 };
		if (where === 'home') { r = 0; c = 0; } else if (where === 'end') { r = s.rows - 1; c = s.cols - 1; } else { r += dr; c += dc; }
		/* past the edge of a panel in a grid: the next panel */
		const k = this.shown.indexOf(p);
		if (c >= s.cols && k + 1 < this.shown.length) { p = this.shown[k + 1]; c = 0; }
		if (c < 0 && k > 0) { p = this.shown[k - 1]; c = s.cols - 1; }
		r = Math.max(0, Math.min(s.rows - 1, r));
		c = Math.max(0, Math.min(s.cols - 1, c));
		const b = this.L.boxes.find((bb) => bb.p === p);
		this.setCursor({ p, r, c }, true, b.x + (c + 0.5) * b.w / s.cols, b.y + (r + 0.5) * b.h / s.rows);
	}

	setCursor(cell, showTip, x, y) {
		const s = this.spec;
		this.cur = cell;
		const v = s.data[cell.p * s.rows * s.cols + cell.r * s.cols + cell.c];
		const value = isBad(v) && Number.isFinite(v) ? `${s.format(v)} (masked)` : s.format(v);
		const panel = s.panels > 1 ? `${esc(s.panelNames[cell.p])} · ` : '';
		this.say(`${panel}${esc(s.yName)} <b>${esc(s.rowValue(cell.r))}</b>, ${esc(s.xName)} <b>${esc(s.colValue(cell.c))}</b>: <output class="value">${esc(value)}</output>`, x, y, showTip);
		this.drawOverlay();
		if (this.onCursor) this.onCursor(cell);
	}

	overlay(ctx) {
		if (!this.cur || !this.L) return;
		const s = this.spec, b = this.L.boxes.find((bb) => bb.p === this.cur.p);
		if (!b) return;
		const cw = b.w / s.cols, ch = b.h / s.rows;
		const x = b.x + this.cur.c * cw, y = b.y + this.cur.r * ch;
		ctx.lineWidth = 2;
		ctx.strokeStyle = '#fff';
		ctx.strokeRect(x - 1, y - 1, Math.max(cw, 1) + 2, Math.max(ch, 1) + 2);
		ctx.lineWidth = 1;
		ctx.strokeStyle = '#111';
		ctx.strokeRect(x - 2.5, y - 2.5, Math.max(cw, 1) + 5, Math.max(ch, 1) + 5);
	}
}
