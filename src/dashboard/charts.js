/* posenc dashboard: figure plumbing shared by every plot, and the line chart.
 *
 * A figure is a <canvas> for the picture and a second canvas stacked on top of it for the cursor
 * (hover outline, guide line), so hovering never repaints, or changes a single pixel of, the
 * picture itself; the browser tests sample the picture's pixels. Canvases follow their box's CSS
 * size and devicePixelRatio and redraw when the box is resized.
 *
 * Hover and keyboard give the same read-out: the mouse, or the arrow keys once the figure has focus
 * (Shift: 10 steps, Home/End), move a cursor whose exact value is written to the figure's
 * read-out line (aria-live) and a tooltip. The plot rectangle is published on the canvas as
 * data-plot="x,y,w,h" (CSS pixels), with the figure's range in data-lo / data-hi. */

export const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
export const INK = '#1d2330';
export const GRID = '#e3e6ec';

/* About count round tick values covering [lo, hi]; integer steps when integer is set. */
export function niceTicks(lo, hi, count = 6, integer = false) {
	if (!(hi > lo)) return [lo];
	let step = (hi - lo) / Math.max(1, count);
	const mag = 10 ** Math.floor(Math.log10(step));
	const f = step / mag;
	step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
	if (integer) step = Math.max(1, Math.round(step));
	const out = [];
	for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
	return out;
}

/* Short tick labels: 4 significant digits, exponent form for very small or large values. */
export function fmtTick(v) {
	if (v === 0) return '0';
	const a = Math.abs(v);
	if (Number.isInteger(v) && a < 1e12) return String(v); /* positions: 1000036, not 1e+6 */
	if (a >= 1e6 || a < 1e-3) return v.toExponential(2).replace(/\.?0+e/, 'e');
	return String(Number(v.toPrecision(4)));
}

/* The canvases, tooltip and sizing of one figure inside wrap (a positioned element with a
 * CSS height). draw(ctx, w, h, dpr) paints the picture; overlay(ctx, w, h) the cursor. */
export class Figure {
	constructor(wrap, { label, readout } = {}) {
		this.wrap = wrap;
		this.readout = readout || null;
		this.canvas = document.createElement('canvas');
		this.canvas.className = 'plot';
		this.canvas.tabIndex = 0;
		this.canvas.setAttribute('role', 'img');
		this.canvas.setAttribute('aria-label', label || 'figure');
		this.over = document.createElement('canvas');
		this.over.className = 'overlay';
		this.over.setAttribute('aria-hidden', 'true');
		this.tip = document.createElement('div');
		this.tip.className = 'tooltip';
		this.tip.hidden = true;
		wrap.append(this.canvas, this.over, this.tip);
		this.size = { w: 0, h: 0, dpr: 1 };
		this.ready = false;
		new ResizeObserver(() => { if (this.ready) this.render(); }).observe(wrap);
		this.canvas.addEventListener('mousemove', (e) => {
			const r = this.canvas.getBoundingClientRect();
			this.hover(e.clientX - r.left, e.clientY - r.top, true);
		});
		this.canvas.addEventListener('mouseleave', () => { this.tip.hidden = true; });
		this.canvas.addEventListener('keydown', (e) => this.key(e));
		this.canvas.addEventListener('focus', () => { if (this.ready && !this.hasCursor()) this.moveCursor(0, 0, 'home'); });
		this.canvas.addEventListener('blur', () => { this.tip.hidden = true; });
	}

	/* Size both canvases to the wrap and repaint. */
	render() {
		const rect = this.wrap.getBoundingClientRect();
		const dpr = window.devicePixelRatio || 1;
		const w = Math.max(200, Math.floor(rect.width)), h = Math.max(160, Math.floor(rect.height));
		for (const c of [this.canvas, this.over]) {
			c.width = Math.round(w * dpr);
			c.height = Math.round(h * dpr);
			c.style.width = `${w}px`;
			c.style.height = `${h}px`;
		}
		this.size = { w, h, dpr };
		const ctx = this.canvas.getContext('2d');
		ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
		ctx.clearRect(0, 0, w, h);
		ctx.fillStyle = '#fff';
		ctx.fillRect(0, 0, w, h);
		this.draw(ctx, w, h, dpr);
		this.drawOverlay();
	}

	drawOverlay() {
		const { w, h, dpr } = this.size;
		const ctx = this.over.getContext('2d');
		ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
		ctx.clearRect(0, 0, w, h);
		if (this.ready) this.overlay(ctx, w, h);
	}

	/* Show text in the read-out line and in the tooltip near (x, y) in CSS pixels. */
	say(html, x, y, showTip) {
		if (this.readout) this.readout.innerHTML = html;
		if (!showTip) return;
		this.tip.innerHTML = html;
		this.tip.hidden = false;
		const tw = this.tip.offsetWidth, th = this.tip.offsetHeight;
		const left = x + 14 + tw > this.size.w ? x - tw - 10 : x + 14;
		const top = y + 16 + th > this.size.h ? y - th - 8 : y + 16;
		this.tip.style.left = `${Math.max(0, left)}px`;
		this.tip.style.top = `${Math.max(0, top)}px`;
	}

	key(e) {
		if (!this.ready) return;
		const step = e.shiftKey ? 10 : 1;
		const moves = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] };
		if (moves[e.key]) this.moveCursor(...moves[e.key]);
		else if (e.key === 'Home') this.moveCursor(0, 0, 'home');
		else if (e.key === 'End') this.moveCursor(0, 0, 'end');
		else return;
		e.preventDefault();
	}
}

/* Escape text for the read-out's innerHTML. */
export function esc(s) {
	return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
}

/* Size canvas c to w x h CSS pixels at the device's pixel ratio; its cleared 2-D context, in CSS pixels. */
export function sizedContext(c, w, h) {
	const dpr = window.devicePixelRatio || 1;
	c.width = Math.round(w * dpr);
	c.height = Math.round(h * dpr);
	c.style.width = `${w}px`;
	c.style.height = `${h}px`;
	const g = c.getContext('2d');
	g.setTransform(dpr, 0, 0, dpr, 0, 0);
	g.clearRect(0, 0, w, h);
	return g;
}

export const SERIES_COLORS = ['#2a6fb0', '#d1495b', '#2e8b57', '#8a5cc2', '#e08a1e'];

/* A line chart of one or more series over a shared x: {x: Float64Array|null (0..n-1 if null),
 * series: [{y, label}], xLabel, yLabel, title, format(v)}. */
export class LineChart extends Figure {
	constructor(wrap, opts) {
		super(wrap, opts);
		this.cursor = -1;
	}

	show(spec) {
		this.spec = spec;
		const n = spec.series.length ? spec.series[0].y.length : 0;
		this.n = n;
		this.xs = spec.x || Float64Array.from({ length: n }, (_, i) => i);
		let lo = Infinity, hi = -Infinity;
		for (const s of spec.series)
			for (const v of s.y)
				if (Number.isFinite(v) && v > -3e38) { if (v < lo) lo = v; if (v > hi) hi = v; }
		if (!(lo <= hi)) { lo = 0; hi = 1; }
		if (spec.zeroBased && lo > 0) lo = 0;
		const pad = hi > lo ? (hi - lo) * 0.05 : Math.abs(hi) * 0.05 || 1;
		this.ylo = lo - pad;
		this.yhi = hi + pad;
		this.xlo = this.xs[0];
		this.xhi = this.xs[n - 1] > this.xs[0] ? this.xs[n - 1] : this.xs[0] + 1;
		this.ready = n > 0;
		if (this.cursor >= n) this.cursor = -1;
		this.canvas.setAttribute('aria-label', `${spec.title || 'line chart'}: ${spec.yLabel} against ${spec.xLabel}`);
		this.render();
	}

	margins() { return { l: 70, r: 18, t: 30, b: 46 }; }

	px(x) { const m = this.margins(); return m.l + (x - this.xlo) / (this.xhi - this.xlo) * (this.size.w - m.l - m.r); }
	py(y) { const m = this.margins(); return m.t + (this.yhi - y) / (this.yhi - this.ylo) * (this.size.h - m.t - m.b); }

	draw(ctx, w, h) {
		if (!this.ready) return;
		const m = this.margins(), s = this.spec;
		const pw = w - m.l - m.r, ph = h - m.t - m.b;
		this.canvas.dataset.plot = [m.l, m.t, pw, ph].join(',');
		this.canvas.dataset.lo = this.ylo;
		this.canvas.dataset.hi = this.yhi;
		ctx.font = FONT;
		ctx.lineWidth = 1;
		/* grid and ticks */
		ctx.fillStyle = INK;
		ctx.textAlign = 'right';
		ctx.textBaseline = 'middle';
		for (const v of niceTicks(this.ylo, this.yhi, Math.max(3, Math.floor(ph / 50)))) {
			const y = Math.round(this.py(v)) + 0.5;
			ctx.strokeStyle = GRID;
			ctx.beginPath(); ctx.moveTo(m.l, y); ctx.lineTo(m.l + pw, y); ctx.stroke();
			ctx.fillText(fmtTick(v), m.l - 6, y);
		}
		ctx.textAlign = 'center';
		ctx.textBaseline = 'top';
		const integerX = Number.isInteger(this.xlo) && Number.isInteger(this.xhi) && this.xs.every((v) => Number.isInteger(v));
		for (const v of niceTicks(this.xlo, this.xhi, Math.max(3, Math.floor(pw / 90)), integerX)) {
			const x = Math.round(this.px(v)) + 0.5;
			ctx.strokeStyle = GRID;
			ctx.beginPath(); ctx.moveTo(x, m.t); ctx.lineTo(x, m.t + ph); ctx.stroke();
			ctx.fillText(fmtTick(v), x, m.t + ph + 6);
		}
		/* zero line, axes */
		ctx.strokeStyle = '#9aa3b2';
		if (this.ylo < 0 && this.yhi > 0) {
			const y = Math.round(this.py(0)) + 0.5;
			ctx.beginPath(); ctx.moveTo(m.l, y); ctx.lineTo(m.l + pw, y); ctx.stroke();
		}
		ctx.strokeStyle = INK;
		ctx.strokeRect(m.l + 0.5, m.t + 0.5, pw, ph);
		/* labels */
		ctx.fillText(s.xLabel || '', m.l + pw / 2, h - 18);
		ctx.save();
		ctx.translate(14, m.t + ph / 2);
		ctx.rotate(-Math.PI / 2);
		ctx.textBaseline = 'middle';
		ctx.fillText(s.yLabel || '', 0, 0);
		ctx.restore();
		ctx.font = `600 ${FONT}`;
		ctx.textAlign = 'left';
		ctx.fillText(s.title || '', m.l, 8);
		/* series, clipped to the plot */
		ctx.save();
		ctx.beginPath(); ctx.rect(m.l, m.t, pw, ph); ctx.clip();
		s.series.forEach((ser, k) => {
			ctx.strokeStyle = ser.color || SERIES_COLORS[k % SERIES_COLORS.length];
			ctx.lineWidth = 1.75;
			ctx.beginPath();
			let pen = false;
			for (let i = 0; i < ser.y.length; i++) {
				const v = ser.y[i];
				if (!Number.isFinite(v) || v <= -3e38) { pen = false; continue; }
				const x = this.px(this.xs[i]), y = this.py(v);
				if (pen) ctx.lineTo(x, y); else ctx.moveTo(x, y);
				pen = true;
			}
			ctx.stroke();
			if (ser.y.length <= 64) {
				ctx.fillStyle = ctx.strokeStyle;
				for (let i = 0; i < ser.y.length; i++)
					if (Number.isFinite(ser.y[i])) { ctx.beginPath(); ctx.arc(this.px(this.xs[i]), this.py(ser.y[i]), 2.5, 0, 7); ctx.fill(); }
			}
		});
		ctx.restore();
		/* legend for more than one series */
		if (s.series.length > 1) {
			ctx.font = FONT;
			ctx.textAlign = 'right';
			let y = m.t + 10;
			s.series.forEach((ser, k) => {
				ctx.fillStyle = ser.color || SERIES_COLORS[k % SERIES_COLORS.length];
				ctx.fillRect(m.l + pw - 8 - 18, y - 1, 16, 3);
				ctx.fillStyle = INK;
				ctx.textBaseline = 'middle';
				ctx.fillText(ser.label, m.l + pw - 30, y);
				y += 16;
			});
		}
	}

	hasCursor() { return this.cursor >= 0; }

	overlay(ctx) {
		if (this.cursor < 0) return;
		const m = this.margins();
		const x = Math.round(this.px(this.xs[this.cursor])) + 0.5;
		ctx.strokeStyle = 'rgba(29,35,48,0.55)';
		ctx.setLineDash([4, 3]);
		ctx.beginPath(); ctx.moveTo(x, m.t); ctx.lineTo(x, this.size.h - m.b); ctx.stroke();
		ctx.setLineDash([]);
		this.spec.series.forEach((ser, k) => {
			const v = ser.y[this.cursor];
			if (!Number.isFinite(v)) return;
			ctx.fillStyle = ser.color || SERIES_COLORS[k % SERIES_COLORS.length];
			ctx.beginPath(); ctx.arc(x, this.py(v), 4, 0, 7); ctx.fill();
		});
	}

	/* The index nearest to x (CSS pixels); the x values are sorted. */
	indexAt(x) {
		const m = this.margins();
		const t = this.xlo + (x - m.l) / (this.size.w - m.l - m.r) * (this.xhi - this.xlo);
		let lo = 0, hi = this.n - 1;
		while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (this.xs[mid] < t) lo = mid; else hi = mid; }
		return Math.abs(this.xs[lo] - t) <= Math.abs(this.xs[hi] - t) ? lo : hi;
	}

	hover(x, y, showTip) {
		if (!this.ready) return;
		const m = this.margins();
		if (x < m.l - 4 || x > this.size.w - m.r + 4) { this.tip.hidden = true; return; }
		this.setCursor(this.indexAt(x), showTip, x, y);
	}

	moveCursor(dx, _dy, where) {
		let i = where === 'home' ? 0 : where === 'end' ? this.n - 1 : Math.max(0, this.cursor) + dx;
		i = Math.max(0, Math.min(this.n - 1, i));
		this.setCursor(i, true, this.px(this.xs[i]), this.size.h / 3);
	}

	setCursor(i, showTip, x, y) {
		this.cursor = i;
		const s = this.spec, fmt = s.format || String;
		const vals = s.series.map((ser) => `${s.series.length > 1 ? `${esc(ser.label)} ` : ''}<output class="value">${esc(fmt(ser.y[i]))}</output>`);
		this.say(`${esc(s.xLabel)} <b>${esc(fmtX(this.xs[i]))}</b>: ${vals.join(', ')}`, x, y, showTip);
		this.drawOverlay();
		if (this.onCursor) this.onCursor(i);
	}
}

function fmtX(v) {
	return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
}
