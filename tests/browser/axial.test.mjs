/* The axial RoPE view (src/dashboard/axial.js) in Chromium: for an image (FLUX, text tokens first)
 * and a video (Wan, CogVideoX) it draws one block per axis whose cells are the ids of
 * /v1/rope/axial/positions (read back from the canvas' data and, for some cells, its pixels against
 * matplotlib's viridis over that axis' range), the channel bands of axes_dim (the table's own
 * params) and the cos plane of /v1/rope/axial; a bad grid shows the 400 and marks grid. Run through
 * tests/browser/run.sh. */

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
	assertClean, canvasInfo, getJson, httpGet, nearestIndex, openPage, parseNpy, ready, referenceViridis, screenshot,
	useBrowser, viridisIndex,
} from './harness.mjs';

const browser = useBrowser();
const VIRIDIS = referenceViridis();

const idGrid = (page) => page.$eval('#view-axial canvas.idgrid', (c) => ({ ...c.dataset }));
const bands = (page) => page.$eval('#view-axial canvas.strip', (c) => c.dataset.values.split(',').map(Number));

/* RGB at CSS pixel (x, y) of the id grid canvas, from a copy (the page's canvas is never read). */
const pixelAt = (page, x, y) => page.$eval('#view-axial canvas.idgrid', (c, [px, py]) => {
	const copy = document.createElement('canvas');
	copy.width = c.width; copy.height = c.height;
	const g = copy.getContext('2d', { willReadFrequently: true });
	g.drawImage(c, 0, 0);
	return Array.from(g.getImageData(Math.round(px), Math.round(py), 1, 1).data.slice(0, 3));
}, [x, y]);

/* The channel of each axis: axes_dim[a] channels of axis a, in axis order. */
const bandOf = (axes) => axes.flatMap((d, a) => Array(d).fill(a));

async function setForm(page, values) {
	let url = await page.evaluate(() => document.getElementById('view-axial').dataset.url);
	for (const [name, v] of Object.entries(values)) {
		const sel = `#view-axial [name="${name}"]`;
		if (await page.$eval(sel, (e) => e.tagName) === 'SELECT') await page.selectOption(sel, v);
		else await page.fill(sel, v);
	}
	url = await ready(page, 'axial', { changedFrom: url });
	return url;
}

/* Everything drawn for query q (preset, grid, ...) equals what the API answers for it. */
async function checkDrawn(page, q) {
	const url = await ready(page, 'axial');
	const [posUrl, tableUrl] = url.split(' ');
	assert.match(posUrl, /^\/v1\/rope\/axial\/positions\?.*&format=bin$/);
	assert.match(tableUrl, /^\/v1\/rope\/axial\?.*&format=bin$/);
	const ids = parseNpy((await httpGet(posUrl.replace('format=bin', 'format=npy'))).body);
	const table = await getJson(tableUrl.replace('&format=bin', ''));
	const [S, n] = ids.shape;
	const dims = q.grid.split('x').map(Number);
	const [T, H, W] = dims.length === 2 ? [1, ...dims] : dims;
	const info = await idGrid(page);
	assert.equal(Number(info.axes), n);
	assert.equal(Number(info.rows), H);
	assert.equal(Number(info.cols), W);
	assert.equal(Number(info.frames), Math.min(T, 8));
	assert.equal(Number(info.text), S - T * H * W);
	assert.equal(Number(info.text), q.text || 0);
	/* the ids drawn are the API's, token by token */
	assert.deepEqual(info.ids.split(',').map(Number), Array.from(ids.data));
	/* some cells' colours: viridis of the id over its axis' range */
	const boxes = JSON.parse(info.boxes), ranges = JSON.parse(info.ranges);
	for (let a = 0; a < n; a++) {
		const [x0, y0, cell, stride] = boxes[a];
		let lo = Infinity, hi = -Infinity;
		for (let s = 0; s < S; s++) { lo = Math.min(lo, ids.data[s * n + a]); hi = Math.max(hi, ids.data[s * n + a]); }
		assert.deepEqual(ranges[a], [lo, hi]);
		for (const [f, r, c] of [[0, 0, 0], [Math.min(T, 8) - 1, H - 1, W - 1], [0, H >> 1, W - 1]]) {
			const s = (q.text || 0) + (f * H + r) * W + c;
			const rgb = await pixelAt(page, x0 + f * stride + (c + 0.5) * cell, y0 + (r + 0.5) * cell);
			const want = viridisIndex(ids.data[s * n + a], lo, hi);
			assert.ok(Math.abs(nearestIndex(VIRIDIS, rgb) - want) <= 1, `axis ${a} token ${s}: entry ${nearestIndex(VIRIDIS, rgb)}, want ${want}`);
		}
	}
	/* the channel bands are axes_dim's, in axis order */
	const axes = table.params.axes_dim;
	assert.deepEqual(await bands(page), bandOf(axes));
	assert.equal(await page.getAttribute('#view-axial', 'data-axes'), axes.join(','));
	let off = 0;
	const caption = await page.textContent('#view-axial .caption');
	axes.forEach((d, a) => { assert.ok(caption.includes(`channels ${off}–${off + d - 1}`), caption); off += d; });
	/* the cos heatmap is the table's [S, Σ axes_dim] */
	const heat = await canvasInfo(page, 'axial', 0);
	assert.equal(Number(heat.rows), S);
	assert.equal(Number(heat.cols), axes.reduce((x, y) => x + y, 0));
	assert.deepEqual(table.shape, [2, S, Number(heat.cols)]);
	return { S, n, axes };
}

describe('axial RoPE view', () => {
	test('FLUX: an image grid after its text tokens, ids per axis and the 16/56/56 bands', async () => {
		const p = await openPage(browser.context, '#axial');
		const { S, axes } = await checkDrawn(p.page, { preset: 'flux', grid: '8x8', text: 4 });
		assert.equal(S, 4 + 64);
		assert.deepEqual(axes, [16, 56, 56]);
		await screenshot(p.page, 'axial-flux');
		assertClean(p);
		await p.page.close();
	});

	test('videos: Wan and CogVideoX frames, and a Qwen-Image grid centred on zero', async () => {
		const p = await openPage(browser.context, '#axial');
		await ready(p.page, 'axial');
		await setForm(p.page, { preset: 'wan', grid: '3x6x8' }); /* text_tokens is hidden: Wan has none */
		const wan = await checkDrawn(p.page, { preset: 'wan', grid: '3x6x8' });
		assert.deepEqual(wan.axes, [44, 42, 42]);
		await setForm(p.page, { preset: 'cogvideox', grid: '2x6x9' });
		const cog = await checkDrawn(p.page, { preset: 'cogvideox', grid: '2x6x9' });
		assert.deepEqual(cog.axes, [16, 24, 24]);
		await screenshot(p.page, 'axial-cogvideox');
		await setForm(p.page, { preset: 'qwenimage', grid: '1x6x6', text_tokens: '3' });
		await checkDrawn(p.page, { preset: 'qwenimage', grid: '1x6x6', text: 3 });
		assertClean(p);
		await p.page.close();
	});

	test('a grid the preset refuses shows the 400 and marks grid', async () => {
		const p = await openPage(browser.context, '#axial');
		let url = await ready(p.page, 'axial');
		await p.page.fill('#view-axial [name="grid"]', '2x3x4x5');
		await ready(p.page, 'axial', { state: 'error' });
		const text = await p.page.textContent('#view-axial .error');
		assert.match(text, /^400 /);
		assert.match(text, /grid/);
		assert.equal(await p.page.getAttribute('#view-axial [name="grid"]', 'aria-invalid'), 'true');
		await p.page.fill('#view-axial [name="grid"]', '4x4');
		url = await ready(p.page, 'axial', { changedFrom: url });
		assert.match(url, /grid=4x4/);
		assertClean(p, { httpErrorsAllowed: true });
		await p.page.close();
	});
});
