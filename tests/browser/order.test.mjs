/* The "Why order matters" view (src/dashboard/order.js) in Chromium: a sentence becomes tokens=
 * (distinct words numbered in order of first appearance, repeats sharing an id), the two attention
 * heatmaps show the API's own weights in viridis over [0, 1] (sampled at cell centres and compared
 * with matplotlib's table from src/tensor/colormap.c), the verdict and output difference are the
 * API's, shuffling sends a permutation, a length replaces an empty sentence, the API's errors are
 * shown, and the curl / NumPy snippets ask exactly what is drawn.
 * Run through tests/browser/run.sh (it starts the daemon and sets PE_BROWSER_ORIGIN). */

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
	ORIGIN, assertClean, canvasInfo, cellCentre, getJson, hex, openPage, pixels, ready, referenceViridis, screenshot,
	useBrowser, viridisIndex,
} from './harness.mjs';

const VIRIDIS = referenceViridis();
const browser = useBrowser();

const params = (url) => Object.fromEntries(new URL(url, ORIGIN).searchParams);

/* Every cell of both heatmaps has the viridis colour of the API's weight (range [0, 1]). */
async function checkHeatmaps(page, doc) {
	const n = doc.len;
	for (const [k, m] of [[0, doc.attention], [1, doc.attention_permuted]]) {
		const info = await canvasInfo(page, 'order', k);
		assert.equal(Number(info.rows), n);
		assert.equal(Number(info.lo), 0);
		assert.equal(Number(info.hi), 1);
		const box = info.plot.split(',').map(Number);
		const cells = [];
		for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) cells.push([r, c]);
		const got = await pixels(page, 'order', cells.map(([r, c]) => cellCentre(box, n, n, r, c)), k);
		cells.forEach(([r, c], i) => {
			const want = VIRIDIS[viridisIndex(m[r][c], 0, 1)];
			assert.ok(got[i].every((v, j) => Math.abs(v - want[j]) <= 1),
				`heatmap ${k} cell (${r}, ${c}) = ${m[r][c]}: ${hex(got[i])} vs ${hex(want)}`);
		});
	}
}

describe('why order matters', () => {
	test('a sentence with RoPE: tokens, the two heatmaps, the verdict and the difference are the API\'s', async () => {
		const p = await openPage(browser.context, '#order');
		const url = await ready(p.page, 'order');
		assert.equal(url, '/v1/analysis/order?encoding=rope&tokens=0,1,2&dim=16');
		const doc = await getJson(url);
		assert.deepEqual(doc.perm, [2, 1, 0]);
		assert.equal(doc.equivariant, false);
		await checkHeatmaps(p.page, doc);
		assert.equal(await p.page.getAttribute('#view-order .verdict', 'data-equivariant'), 'false');
		assert.equal(Number(await p.page.textContent('#view-order .verdict .difference')), doc.output_difference);
		assert.match(await p.page.textContent('#view-order .caption'), /RoPE rotates/);
		await screenshot(p.page, 'order');
		assertClean(p);
		await p.page.close();
	});

	test('without an encoding the outputs are only reordered; repeated words share a token', async () => {
		const p = await openPage(browser.context, '#order');
		const first = await ready(p.page, 'order');
		await p.page.selectOption('#view-order select[name="encoding"]', 'none');
		const before2 = await ready(p.page, 'order', { changedFrom: first });
		await p.page.fill('#view-order input[name="sentence"]', 'The cat saw the dog');
		const url = await ready(p.page, 'order', { changedFrom: before2 });
		assert.deepEqual(params(url), { encoding: 'none', tokens: '0,1,2,0,3', dim: '16' });
		const doc = await getJson(url);
		assert.equal(doc.equivariant, true);
		assert.ok(doc.output_difference <= 1e-9);
		assert.equal(await p.page.getAttribute('#view-order .verdict', 'data-equivariant'), 'true');
		await checkHeatmaps(p.page, doc);
		assertClean(p);
		await p.page.close();
	});

	test('shuffle sends a permutation; reverse goes back to the default; a length replaces an empty sentence', async () => {
		const p = await openPage(browser.context, '#order');
		let url = await ready(p.page, 'order');
		await p.page.fill('#view-order input[name="sentence"]', 'one two three four five six');
		url = await ready(p.page, 'order', { changedFrom: url });
		let seen = url;
		for (let k = 0; k < 8 && seen === url; k++) { /* a shuffle may repeat the last order */
			await p.page.click('#view-order button[name="shuffle"]');
			await p.page.waitForTimeout(50);
			seen = await ready(p.page, 'order');
		}
		const q = params(seen);
		assert.ok(q.perm, `a shuffle sends perm: ${seen}`);
		assert.deepEqual(q.perm.split(',').map(Number).sort((a, b) => a - b), [0, 1, 2, 3, 4, 5]);
		const doc = await getJson(seen);
		assert.equal(await p.page.getAttribute('#view-order .verdict', 'data-equivariant'), String(doc.equivariant));
		await p.page.click('#view-order button[name="reverse"]');
		const back = await ready(p.page, 'order', { changedFrom: seen });
		assert.equal(params(back).perm, undefined);
		await p.page.fill('#view-order input[name="sentence"]', '');
		await p.page.fill('#view-order input[name="len"]', '5');
		const byLen = await ready(p.page, 'order', { changedFrom: back });
		assert.deepEqual(params(byLen), { encoding: 'rope', len: '5', dim: '16' });
		assertClean(p);
		await p.page.close();
	});

	test('ALiBi: reversal keeps every distance (equivariant), as the caption says', async () => {
		const p = await openPage(browser.context, '#order');
		const first = await ready(p.page, 'order');
		await p.page.selectOption('#view-order select[name="encoding"]', 'alibi');
		const url = await ready(p.page, 'order', { changedFrom: first });
		assert.equal((await getJson(url)).equivariant, true);
		assert.equal(await p.page.getAttribute('#view-order .verdict', 'data-equivariant'), 'true');
		assert.match(await p.page.textContent('#view-order .caption'), /reversing keeps every distance/);
		assertClean(p);
		await p.page.close();
	});

	test('an API error is shown with the parameter it names', async () => {
		const p = await openPage(browser.context, '#order');
		await ready(p.page, 'order');
		await p.page.fill('#view-order input[name="dim"]', '7');
		await ready(p.page, 'order', { state: 'error' });
		const text = await p.page.textContent('#view-order .error');
		assert.match(text, /^400 /);
		assert.match(text, /parameter dim/);
		assertClean(p, { httpErrorsAllowed: true });
		await p.page.close();
	});

	test('the curl and NumPy snippets ask exactly what is drawn', async () => {
		const p = await openPage(browser.context, '#order');
		const url = await ready(p.page, 'order');
		const abs = new URL(url, ORIGIN).href;
		assert.equal(await p.page.textContent('#view-order .snippet-curl'), `curl -fsS '${abs}'`);
		const python = await p.page.textContent('#view-order .snippet-python');
		assert.ok(python.includes(JSON.stringify(abs)), python);
		assert.match(python, /np\.array\(doc\["attention"\]\)/);
		assertClean(p);
		await p.page.close();
	});
});
