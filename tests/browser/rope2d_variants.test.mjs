/* The dashboard's rope2d table with its variants, in a real browser: the controls come from the
 * catalogue, so the variant selector offers qwen2vl, pixtral and llama4, each variant's own
 * parameter is shown only with it (spatial_merge_size with qwen2vl, max_patches_per_side with
 * pixtral) and left out of the request otherwise, the request follows the selection, Llama 4's
 * class token is drawn as the last row (cos 1: the top colour), and a non-square Llama 4 grid shows
 * the API's problem naming width. Run through tests/browser/run.sh. */

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
	assertClean, canvasInfo, cellCentre, hex, httpGet, openPage, pixels, ready, screenshot, useBrowser,
} from './harness.mjs';

const browser = useBrowser();

const V = '#view-tables';
const visible = (page, name) => page.isVisible(`${V} [name="${name}"]`);

describe('rope2d variants', () => {
	test('the variant selector and each variant\'s own parameter', async () => {
		const p = await openPage(browser.context);
		let url = await ready(p.page, 'tables');
		await p.page.selectOption(`${V} select[name="table"]`, 'rope2d');
		url = await ready(p.page, 'tables', { changedFrom: url });
		assert.match(url, /^\/v1\/rope2d\?height=14&width=14&dim=128&format=bin$/);
		const offered = await p.page.$eval(`${V} select[name="variant"]`, (s) => [...s.options].map((o) => o.value));
		for (const v of ['qwen2vl', 'pixtral', 'llama4']) assert.ok(offered.includes(v), `variant ${v} offered: ${offered}`);
		assert.equal(await visible(p.page, 'spatial_merge_size'), true);
		assert.equal(await visible(p.page, 'max_patches_per_side'), false);

		await p.page.fill(`${V} input[name="spatial_merge_size"]`, '2');
		url = await ready(p.page, 'tables', { changedFrom: url });
		assert.match(url, /^\/v1\/rope2d\?[^ ]*spatial_merge_size=2/);

		await p.page.selectOption(`${V} select[name="variant"]`, 'pixtral');
		url = await ready(p.page, 'tables', { changedFrom: url });
		assert.match(url, /variant=pixtral/);
		assert.doesNotMatch(url, /spatial_merge_size/);
		assert.equal(await visible(p.page, 'spatial_merge_size'), false);
		assert.equal(await visible(p.page, 'max_patches_per_side'), true);
		await screenshot(p.page, 'rope2d-pixtral');

		await p.page.selectOption(`${V} select[name="variant"]`, 'llama4');
		url = await ready(p.page, 'tables', { changedFrom: url });
		assert.match(url, /variant=llama4/);
		assert.doesNotMatch(url, /spatial_merge_size|max_patches_per_side/);
		/* 14 x 14 patches and the class token: 197 rows; its cos row is 1, the top colour */
		const res = await httpGet(url);
		assert.equal(res.status, 200);
		assert.equal(res.headers['x-pe-shape'], '2,197,128');
		const info = await canvasInfo(p.page, 'tables');
		const boxes = JSON.parse(info.boxes);
		assert.equal(boxes.length, 2, 'cos and sin side by side');
		const [cls] = await pixels(p.page, 'tables', [cellCentre(boxes[0].slice(1), 197, 128, 196, 5)]);
		assert.equal(hex(cls), '#fde725');
		await screenshot(p.page, 'rope2d-llama4');
		assertClean(p);
		await p.page.close();
	});

	test('a non-square Llama 4 grid shows the problem naming width', async () => {
		const p = await openPage(browser.context);
		let url = await ready(p.page, 'tables');
		await p.page.selectOption(`${V} select[name="table"]`, 'rope2d');
		url = await ready(p.page, 'tables', { changedFrom: url });
		await p.page.selectOption(`${V} select[name="variant"]`, 'llama4');
		url = await ready(p.page, 'tables', { changedFrom: url });
		await p.page.fill(`${V} input[name="width"]`, '15');
		await ready(p.page, 'tables', { state: 'error' });
		const problem = (await httpGet('/v1/rope2d?height=14&width=15&dim=128&variant=llama4')).json();
		assert.equal(problem.param, 'width');
		const shown = await p.page.textContent(`${V} .error`);
		assert.ok(shown.includes(problem.detail), `"${shown}" shows "${problem.detail}"`);
		assert.equal(await p.page.getAttribute(`${V} input[name="width"]`, 'aria-invalid'), 'true');
		assertClean(p, { httpErrorsAllowed: true });
		await p.page.close();
	});
});
