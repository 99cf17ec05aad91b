/* The dashboard in a real browser: what posencd serves at / loads cleanly, asks nothing of any other
 * origin, and draws what the API returns. Pixels are sampled at cell centres and compared with
 * matplotlib's viridis (read from src/tensor/colormap.c) at the normalised values computed here
 * from the API's own JSON. Screenshots go to build/browser/ for people to look at.
 * Run through tests/browser/run.sh (it starts the daemon and sets PE_BROWSER_ORIGIN). */

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
	ORIGIN, assertClean, blocked, canvasInfo, cellCentre, getJson, hex, httpGet, nearestIndex, openPage, parseNpy,
	pixels, ready, referenceViridis, region, screenshot, useBrowser, viridisIndex,
} from './harness.mjs';

const VIRIDIS = referenceViridis();
const browser = useBrowser();

function close(a, b, tol, what) {
	assert.ok(a.every((v, i) => Math.abs(v - b[i]) <= tol), `${what}: ${hex(a)} vs ${hex(b)}`);
}

/* Data of an f32 JSON table document flattened (each number read back to its f32), with its range. */
function flat(doc) {
	const data = doc.data.flat(Infinity).map(Math.fround);
	return { data, lo: Math.min(...data), hi: Math.max(...data) };
}

describe('dashboard', () => {
	test('loads from the daemon alone, with no console error and no failed request', async () => {
		const p = await openPage(browser.context);
		const url = await ready(p.page, 'tables');
		assert.match(url, /^\/v1\/sinusoidal\?len=64&dim=128&format=bin$/);
		const paths = p.requests.map((u) => new URL(u).pathname);
		for (const f of ['/', '/dashboard/style.css', '/dashboard/app.js', '/v1', '/v1/sinusoidal'])
			assert.ok(paths.includes(f), `requested ${f}`);
		/* every control has a label */
		const unlabelled = await p.page.evaluate(() => [...document.querySelectorAll('input, select, textarea')]
			.filter((e) => e.labels.length === 0 && !e.getAttribute('aria-label')).map((e) => e.outerHTML));
		assert.deepEqual(unlabelled, []);
		/* the catalogue's tables are all offered */
		const cat = await getJson('/v1');
		const offered = await p.page.$eval('#view-tables select[name="table"]', (s) => [...s.options].map((o) => o.value));
		assert.deepEqual(offered, cat.tables.map((t) => t.name));
		await screenshot(p.page, 'tables');
		assertClean(p);
		await p.page.close();
	});

	test('the sinusoidal heatmap shows sin(0) = 0 and cos(0) = 1 in viridis, and every sampled cell', async () => {
		const p = await openPage(browser.context);
		await ready(p.page, 'tables');
		const { data, lo, hi } = flat(await getJson('/v1/sinusoidal?len=64&dim=128'));
		const info = await canvasInfo(p.page, 'tables');
		assert.equal(Number(info.rows), 64);
		assert.equal(Number(info.cols), 128);
		assert.equal(Number(info.lo), lo);
		assert.equal(Number(info.hi), hi);
		const box = info.plot.split(',').map(Number);
		/* position 0: column 0 is sin(0) = 0 (t about 0.5: viridis #21918c), column 1 cos(0) = 1 (the top: #fde725) */
		const [c00, c01] = await pixels(p.page, 'tables', [cellCentre(box, 64, 128, 0, 0), cellCentre(box, 64, 128, 0, 1)]);
		assert.deepEqual(hex(c01), '#fde725');
		close(c00, [0x21, 0x91, 0x8c], 2, 'sin(0)');
		assert.deepEqual(c00, VIRIDIS[viridisIndex(0, lo, hi)]);
		/* a grid of cells: exactly the reference colour of the API's value */
		const cells = [];
		for (let r = 0; r < 64; r += 7) for (let c = 0; c < 128; c += 11) cells.push([r, c]);
		const got = await pixels(p.page, 'tables', cells.map(([r, c]) => cellCentre(box, 64, 128, r, c)));
		cells.forEach(([r, c], k) => assert.deepEqual(got[k], VIRIDIS[viridisIndex(data[r * 128 + c], lo, hi)], `cell ${r},${c}`));
		/* the colour bar: top is the maximum's colour, bottom the minimum's */
		const [bx, by, bw, bh] = info.colorbar.split(',').map(Number);
		const [top, bottom] = await pixels(p.page, 'tables', [[bx + bw / 2, by + 1], [bx + bw / 2, by + bh - 1]]);
		assert.deepEqual(hex(top), '#fde725');
		assert.deepEqual(hex(bottom), '#440154');
		/* RdBu is centred on 0: sin(0) is ColorBrewer's centre grey, cos(0) = 1 its darkest blue */
		await p.page.selectOption('#view-tables select[name="cmap"]', 'RdBu');
		const [r00, r01] = await pixels(p.page, 'tables', [cellCentre(box, 64, 128, 0, 0), cellCentre(box, 64, 128, 0, 1)]);
		assert.equal(hex(r00), '#f7f7f7');
		assert.equal(hex(r01), '#053061');
		assertClean(p);
		await p.page.close();
	});

	test('a parameter change redraws', async () => {
		const p = await openPage(browser.context);
		const before1 = await ready(p.page, 'tables');
		const info = await canvasInfo(p.page, 'tables');
		const box = info.plot.split(',').map(Number);
		const pts = [];
		for (let r = 0; r < 64; r += 9) for (let c = 0; c < 128; c += 5) pts.push(cellCentre(box, 64, 128, r, c));
		const old = await pixels(p.page, 'tables', pts);
		await p.page.fill('#view-tables input[name="base"]', '100');
		const url = await ready(p.page, 'tables', { changedFrom: before1 });
		assert.equal(url, '/v1/sinusoidal?len=64&dim=128&base=100&format=bin');
		const now = await pixels(p.page, 'tables', pts);
		const changed = now.filter((c, i) => hex(c) !== hex(old[i])).length;
		assert.ok(changed > pts.length / 4, `${changed} of ${pts.length} sampled pixels changed`);
		/* and what is drawn now is base=100 */
		const { data, lo, hi } = flat(await getJson('/v1/sinusoidal?len=64&dim=128&base=100'));
		const r = 40, c = 30;
		const [px] = await pixels(p.page, 'tables', [cellCentre(box, 64, 128, r, c)]);
		assert.deepEqual(px, VIRIDIS[viridisIndex(data[r * 128 + c], lo, hi)]);
		assertClean(p);
		await p.page.close();
	});

	test('hover and the arrow keys show the exact value the API returns', async () => {
		const p = await openPage(browser.context);
		await ready(p.page, 'tables');
		const doc = await getJson('/v1/sinusoidal?len=64&dim=128');
		const info = await canvasInfo(p.page, 'tables');
		const box = info.plot.split(',').map(Number);
		for (const [r, c] of [[0, 0], [0, 1], [37, 5], [63, 127], [12, 64]]) {
			const [x, y] = cellCentre(box, 64, 128, r, c);
			await p.page.mouse.move(info.left + x, info.top + y);
			const text = await p.page.textContent('#view-tables .readout');
			const value = await p.page.textContent('#view-tables .readout output.value');
			assert.match(text, new RegExp(`position ${r}, dimension ${c}:`));
			assert.equal(value, String(doc.data[r][c]), `value at ${r},${c}`);
			const tip = await p.page.textContent('#view-tables .tooltip');
			assert.ok(tip.includes(value), 'tooltip shows the value');
		}
		await p.page.mouse.move(5, 5);
		await p.page.focus('#view-tables canvas.plot');
		await p.page.keyboard.press('Home');
		await p.page.keyboard.press('ArrowRight');
		await p.page.keyboard.press('ArrowRight');
		await p.page.keyboard.press('ArrowDown');
		assert.match(await p.page.textContent('#view-tables .readout'), /position 1, dimension 2:/);
		assert.equal(await p.page.textContent('#view-tables .readout output.value'), String(doc.data[1][2]));
		assertClean(p);
		await p.page.close();
	});

	test('the curl and Python snippets fetch exactly what is drawn', async () => {
		const p = await openPage(browser.context);
		await p.page.fill('#view-tables input[name="offset"]', '5000');
		await ready(p.page, 'tables', { changedFrom: '/v1/sinusoidal?len=64&dim=128&format=bin' });
		const curl = await p.page.textContent('#view-tables .snippet-curl');
		const m = curl.match(/^curl -fsS -o (\S+) '([^']+)'$/);
		assert.ok(m, `curl command: ${curl}`);
		assert.equal(m[1], 'sinusoidal.npy');
		assert.equal(m[2], `${ORIGIN}/v1/sinusoidal?len=64&dim=128&offset=5000&format=npy`);
		const python = await p.page.textContent('#view-tables .snippet-python');
		assert.ok(python.includes(`sinusoidal = get("${m[2]}")`), python);
		assert.ok(python.includes('np.load(io.BytesIO('), python);
		const resp = await httpGet(m[2]);
		assert.equal(resp.status, 200);
		const npy = parseNpy(resp.body);
		assert.deepEqual(npy.shape, [64, 128]);
		assert.equal(npy.descr, '<f4');
		const drawn = await p.page.evaluate(() => Array.from(window.posencDashboard.tables.last.data));
		assert.deepEqual(drawn, Array.from(npy.data));
		/* and the pixels are those of the downloaded values */
		const info = await canvasInfo(p.page, 'tables');
		const box = info.plot.split(',').map(Number);
		let lo = Infinity, hi = -Infinity;
		for (const v of npy.data) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
		const cells = [[0, 0], [10, 3], [33, 17], [63, 0], [50, 100]];
		const got = await pixels(p.page, 'tables', cells.map(([r, c]) => cellCentre(box, 64, 128, r, c)));
		cells.forEach(([r, c], k) => assert.deepEqual(got[k], VIRIDIS[viridisIndex(npy.data[r * 128 + c], lo, hi)]));
		/* the y axis shows the real positions */
		await p.page.mouse.move(info.left + cellCentre(box, 64, 128, 0, 0)[0], info.top + cellCentre(box, 64, 128, 0, 0)[1]);
		assert.match(await p.page.textContent('#view-tables .readout'), /position 5000, dimension 0/);
		assertClean(p);
		await p.page.close();
	});

	test('rank-3 tables: RoPE cos/sin panels and ALiBi bias per head', async () => {
		const p = await openPage(browser.context);
		let url = await ready(p.page, 'tables');
		await p.page.selectOption('#view-tables select[name="table"]', 'rope');
		url = await ready(p.page, 'tables', { changedFrom: url });
		assert.match(url, /^\/v1\/rope\?len=128&dim=128&format=bin$/);
		let info = await canvasInfo(p.page, 'tables');
		let boxes = JSON.parse(info.boxes);
		assert.equal(boxes.length, 2, 'cos and sin side by side');
		/* position 0: cos = 1 (top colour), sin = 0 (t = 0.5 of [-1, 1]) */
		const [cos0, sin0] = await pixels(p.page, 'tables', [cellCentre(boxes[0].slice(1), 128, 128, 0, 3), cellCentre(boxes[1].slice(1), 128, 128, 0, 3)]);
		assert.equal(hex(cos0), '#fde725');
		const { lo, hi } = flat(await getJson('/v1/rope?len=128&dim=128'));
		assert.deepEqual(sin0, VIRIDIS[viridisIndex(0, lo, hi)]);
		await screenshot(p.page, 'tables-rope');
		/* one panel at a time */
		await p.page.selectOption('#view-tables select[name="panel"]', '1');
		info = await canvasInfo(p.page, 'tables');
		assert.equal(JSON.parse(info.boxes).length, 1);
		assert.equal(info.panel, '1');

		await p.page.selectOption('#view-tables select[name="table"]', 'alibi');
		url = await ready(p.page, 'tables', { changedFrom: url });
		assert.match(url, /^\/v1\/alibi\?heads=8&q_len=48&format=bin$/);
		await p.page.selectOption('#view-tables select[name="panel"]', '-1');
		info = await canvasInfo(p.page, 'tables');
		boxes = JSON.parse(info.boxes);
		assert.equal(boxes.length, 8, 'one panel per head');
		/* the diagonal (q = k) is 0, the largest bias: the top colour in every head; elsewhere the
		 * colour of the API's bias on the scale shared by all heads (head 0 falls fastest) */
		const alibi = flat(await getJson('/v1/alibi?heads=8&q_len=48'));
		for (const b of boxes) {
			const [d, off] = await pixels(p.page, 'tables', [cellCentre(b.slice(1), 48, 48, 20, 20), cellCentre(b.slice(1), 48, 48, 20, 0)]);
			assert.equal(hex(d), '#fde725', `head ${b[0]} diagonal`);
			assert.deepEqual(off, VIRIDIS[viridisIndex(alibi.data[(b[0] * 48 + 20) * 48], alibi.lo, alibi.hi)], `head ${b[0]} at q 20, k 0`);
		}
		const [h0] = await pixels(p.page, 'tables', [cellCentre(boxes[0].slice(1), 48, 48, 47, 0)]);
		assert.equal(hex(h0), '#440154', 'head 0, q 47, k 0: the lowest bias');
		await screenshot(p.page, 'tables-alibi');
		assertClean(p);
		await p.page.close();
	});

	test('every table of the catalogue draws from its own controls', async () => {
		const p = await openPage(browser.context);
		let url = await ready(p.page, 'tables');
		const cat = await getJson('/v1');
		for (const t of cat.tables) {
			if (t.name === 'sinusoidal') continue;
			await p.page.selectOption('#view-tables select[name="table"]', t.name);
			url = await ready(p.page, 'tables', { changedFrom: url }).catch((e) => {
				throw new Error(`${t.name}: not drawn from its starting controls (${e.message}; ${JSON.stringify(p.problems)})`);
			});
			assert.ok(url.startsWith(`${t.path}?`), `${t.name}: ${url}`);
			/* one control per parameter the table has (conditional ones may be hidden) */
			const names = await p.page.$$eval('#view-tables form.controls .params [name]', (es) => es.map((e) => e.name));
			assert.deepEqual(names, t.params.map((q) => q.name), t.name);
			/* the figure is not blank: many distinct colours */
			const rank = (await httpGet(url)).headers['x-pe-shape'].split(',').length;
			const index = rank === 1 ? 1 : 0;
			const info = await canvasInfo(p.page, 'tables', index);
			const [x, y, w, h] = info.plot.split(',').map(Number);
			const img = await region(p.page, 'tables', [x, y, w, h], index);
			const colours = new Set();
			for (let k = 0; k < img.length; k += 4 * 97) colours.add((img[k] << 16) | (img[k + 1] << 8) | img[k + 2]);
			assert.ok(colours.size >= 2, `${t.name}: ${colours.size} colours`);
		}
		assertClean(p);
		await p.page.close();
	});

	test('the similarity matrix is symmetric with its maximum on the diagonal', async () => {
		const p = await openPage(browser.context, '#similarity');
		const url = await ready(p.page, 'similarity');
		assert.equal(url, '/v1/analysis/similarity?len=128&dim=128&format=bin');
		const info = await canvasInfo(p.page, 'similarity');
		const box = info.plot.split(',').map(Number);
		assert.equal(box[2], box[3], 'square plot');
		const idx = [0, 9, 31, 50, 64, 90, 127];
		const pts = [];
		for (const i of idx) for (const j of idx) pts.push(cellCentre(box, 128, 128, i, j));
		const px = await pixels(p.page, 'similarity', pts);
		const at = (a, b) => px[a * idx.length + b];
		for (let a = 0; a < idx.length; a++) {
			assert.equal(hex(at(a, a)), '#fde725', `diagonal ${idx[a]}`);
			for (let b = 0; b < idx.length; b++) {
				assert.equal(hex(at(a, b)), hex(at(b, a)), `S[${idx[a]},${idx[b]}] = S[${idx[b]},${idx[a]}]`);
				if (a !== b) assert.ok(nearestIndex(VIRIDIS, at(a, b)) < 255, `off-diagonal ${idx[a]},${idx[b]} below the maximum`);
			}
		}
		/* it falls with distance from the diagonal: near pairs are brighter than far ones */
		const near = nearestIndex(VIRIDIS, (await pixels(p.page, 'similarity', [cellCentre(box, 128, 128, 64, 65)]))[0]);
		const far = nearestIndex(VIRIDIS, (await pixels(p.page, 'similarity', [cellCentre(box, 128, 128, 64, 0)]))[0]);
		assert.ok(near > far, `near ${near} > far ${far}`);
		/* the row profile is drawn beside it */
		const chart = await canvasInfo(p.page, 'similarity', 1);
		assert.ok(chart.plot, 'row chart drawn');
		await screenshot(p.page, 'similarity');
		assertClean(p);
		await p.page.close();
	});

	test('the RoPE decay curve renders and falls with distance', async () => {
		const p = await openPage(browser.context, '#decay');
		const url = await ready(p.page, 'decay');
		assert.equal(url, '/v1/analysis/rope-decay?format=bin');
		const info = await canvasInfo(p.page, 'decay');
		const [x0, y0, w, h] = info.plot.split(',').map(Number);
		/* the curve's colour (#2a6fb0) in each sampled column: its top-most pixel */
		const img = await region(p.page, 'decay', [x0, y0, w, h]);
		const ys = [];
		for (let k = 2; k < 40; k++) {
			const x = Math.floor(k * w / 41);
			let hit = -1;
			for (let y = 0; y < h; y++) {
				const o = 4 * (y * w + x);
				if (Math.abs(img[o] - 42) < 40 && Math.abs(img[o + 1] - 111) < 40 && Math.abs(img[o + 2] - 176) < 40) { hit = y; break; }
			}
			ys.push(hit);
		}
		assert.ok(ys.every((y) => y >= 0), `curve found in every sampled column: ${ys}`);
		const mean = (a) => a.reduce((s, v) => s + v, 0) / a.length;
		const early = mean(ys.slice(0, 6)), late = mean(ys.slice(-6));
		assert.ok(late > early + h * 0.1, `the curve is lower at long distances (y ${early} -> ${late})`);
		const api = (await getJson('/v1/analysis/rope-decay')).data;
		assert.ok(api[0] > mean(api.slice(-32)) * 2, 'the API agrees: it decays');
		/* a second base adds a second curve */
		await p.page.fill('#decay-compare', '500000');
		const url2 = await ready(p.page, 'decay', { changedFrom: url });
		assert.ok(url2.includes('/v1/analysis/rope-decay?base=500000&format=bin'), url2);
		await screenshot(p.page, 'decay');
		assertClean(p);
		await p.page.close();
	});

	test('exact vs hf: |exact − hf| is drawn and grows at long positions', async () => {
		const p = await openPage(browser.context, '#compat');
		const url = await ready(p.page, 'compat');
		assert.equal(url, '/v1/sinusoidal?len=64&dim=128&offset=1000000&compat=exact&format=bin '
			+ '/v1/sinusoidal?len=64&dim=128&offset=1000000&compat=hf&format=bin');
		const ex = flat(await getJson('/v1/sinusoidal?len=64&dim=128&offset=1000000&compat=exact'));
		const hf = flat(await getJson('/v1/sinusoidal?len=64&dim=128&offset=1000000&compat=hf'));
		const diff = ex.data.map((v, i) => Math.abs(v - hf.data[i]));
		const max = Math.max(...diff);
		assert.ok(max > 1e-3, `float32 drifts at position 1e6 (max ${max})`);
		const info = await canvasInfo(p.page, 'compat');
		assert.equal(Number(info.hi), max);
		assert.equal(Number(info.lo), 0);
		const box = info.plot.split(',').map(Number);
		const cells = [[0, 0], [5, 1], [30, 40], [63, 127], [20, 10]];
		const got = await pixels(p.page, 'compat', cells.map(([r, c]) => cellCentre(box, 64, 128, r, c)));
		cells.forEach(([r, c], k) => assert.deepEqual(got[k], VIRIDIS[viridisIndex(diff[r * 128 + c], 0, max)], `cell ${r},${c}`));
		await screenshot(p.page, 'compat');
		/* at offset 0 the two agree far better */
		await p.page.fill('#view-compat input[name="offset"]', '0');
		await ready(p.page, 'compat', { changedFrom: url });
		const small = Number((await canvasInfo(p.page, 'compat')).hi);
		assert.ok(small < max / 100, `max |exact - hf| at offset 0 (${small}) << at 1e6 (${max})`);
		const python = await p.page.textContent('#view-compat .snippet-python');
		assert.ok(python.includes('diff = np.abs(exact.astype(np.float64) - hf.astype(np.float64))'), python);
		assertClean(p);
		await p.page.close();
	});

	test('an API error is shown with its problem+json detail and marks the parameter', async () => {
		const p = await openPage(browser.context);
		const url = await ready(p.page, 'tables');
		await p.page.fill('#view-tables input[name="dim"]', '0');
		await ready(p.page, 'tables', { state: 'error' });
		const problem = (await httpGet('/v1/sinusoidal?len=64&dim=0')).json();
		const shown = await p.page.textContent('#view-tables .error');
		assert.ok(shown.includes(problem.detail), `"${shown}" shows "${problem.detail}"`);
		assert.ok(shown.includes('400'), shown);
		assert.equal(await p.page.getAttribute('#view-tables input[name="dim"]', 'aria-invalid'), 'true');
		assert.equal(await p.page.isVisible('#view-tables .error'), true);
		await screenshot(p.page, 'error');
		await p.page.fill('#view-tables input[name="dim"]', '128');
		await ready(p.page, 'tables');
		assert.equal(await p.page.isVisible('#view-tables .error'), false);
		assert.notEqual(url, undefined);
		assertClean(p, { httpErrorsAllowed: true });
		await p.page.close();
	});

	test('the tabs work from the keyboard', async () => {
		const p = await openPage(browser.context);
		await ready(p.page, 'tables');
		await p.page.focus('#tab-tables');
		await p.page.keyboard.press('ArrowRight');
		assert.equal(await p.page.getAttribute('#tab-similarity', 'aria-selected'), 'true');
		assert.equal(await p.page.isVisible('#view-similarity'), true);
		assert.equal(await p.page.isVisible('#view-tables'), false);
		await ready(p.page, 'similarity');
		await p.page.keyboard.press('End');
		assert.equal(await p.page.getAttribute('#tab-compat', 'aria-selected'), 'true');
		assert.equal(await p.page.evaluate(() => window.location.hash), '#compat');
		await ready(p.page, 'compat');
		assertClean(p);
		await p.page.close();
	});

	test('the origin guard itself sees a request to another origin', async () => {
		const p = await openPage(browser.context);
		await ready(p.page, 'tables');
		const n = blocked.length;
		const outcome = await p.page.evaluate(() => fetch('http://192.0.2.1/x').then(() => 'fetched', () => 'refused'));
		assert.equal(outcome, 'refused');
		assert.deepEqual(blocked.slice(n), ['http://192.0.2.1/x']);
		blocked.length = n;
		await p.page.close();
	});
});
