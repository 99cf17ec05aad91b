/* The Model plan view in Chromium: a pasted config.json becomes the plan's table (the rows the API
 * answers, with their urls), one click draws an encoding (its canvas shows the table's values:
 * RoPE's cos(0) = 1 is the top of viridis), a dropped file is planned the same way, and a config
 * posenc does not know shows the 422's detail and the key it names, and a table the plan had to
 * give as npy is listed without a Draw button. Run through run.sh. */

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
	ROOT, assertClean, canvasInfo, cellCentre, hex, openPage, pixels, ready, screenshot, useBrowser,
} from './harness.mjs';

const browser = useBrowser();

const config = (name) => fs.readFileSync(path.join(ROOT, 'tests/data/configs', name), 'utf8');

async function planOf(page, text, len) {
	await page.fill('#plan-config', text);
	await page.fill('#plan-len', String(len));
	const old = await page.evaluate(() => document.getElementById('view-plan').dataset.url);
	await page.click('#view-plan button[type="submit"]');
	return ready(page, 'plan', { changedFrom: old });
}

const rowsOf = (page) => page.$$eval('#view-plan table.plan tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));

describe('model plan', () => {
	test('a pasted Gemma 3 config is planned, listed and drawn with one click', async () => {
		const p = await openPage(browser.context, '#plan');
		const url = await planOf(p.page, config('gemma3-4b.json'), 16);
		assert.equal(url, '/v1/plan?len=16');
		const rows = await rowsOf(p.page);
		assert.equal(rows.length, 2);
		assert.deepEqual(rows.map((r) => [r[0], r[1]]), [['rope', 'sliding_attention'], ['rope', 'full_attention']]);
		assert.match(rows[1][2], /^\/v1\/rope\?len=16&.*scaling=linear&factor=8/);
		assert.equal(rows[1][7], '0.0625'); /* softmax_scale: query_pre_attn_scalar^-1/2 */
		const planned = rows[1][2];
		await p.page.click('#view-plan button.draw[data-index="1"]');
		const drawn = await ready(p.page, 'plan', { changedFrom: url });
		assert.equal(drawn, `${planned}&format=bin`);
		const info = await canvasInfo(p.page, 'plan');
		assert.equal(Number(info.rows), 16);
		assert.equal(Number(info.cols), 256);
		const box = info.plot.split(',').map(Number);
		const [c00] = await pixels(p.page, 'plan', [cellCentre(box, 16, 256, 0, 0)]);
		assert.equal(hex(c00), '#fde725'); /* cos(0) = 1, the table's largest value */
		await screenshot(p.page, 'plan');
		assertClean(p, { sameOrigin: false });
		await p.page.close();
	});

	test('a dropped config.json is planned', async () => {
		const p = await openPage(browser.context, '#plan');
		const text = config('t5-small.json');
		await p.page.waitForSelector('#plan-config'); /* the views are built once the catalogue is in */
		await p.page.evaluate((t) => {
			const dt = new DataTransfer();
			dt.items.add(new File([t], 'config.json', { type: 'application/json' }));
			document.getElementById('plan-config').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
		}, text);
		await ready(p.page, 'plan');
		const rows = await rowsOf(p.page);
		assert.deepEqual(rows.map((r) => [r[0], r[1]]), [['relative/t5', 'encoder'], ['relative/t5', 'decoder']]);
		const warnings = await p.page.$$eval('#view-plan ul.warnings li', (li) => li.map((x) => x.textContent));
		assert.ok(warnings.some((w) => w.includes('relative_attention_max_distance')), warnings.join('; '));
		assertClean(p, { sameOrigin: false });
		await p.page.close();
	});

	test('an unknown model family shows the 422 and the key it names', async () => {
		const p = await openPage(browser.context, '#plan');
		await p.page.fill('#plan-config', '{"model_type": "resnet"}');
		await p.page.click('#view-plan button[type="submit"]');
		await ready(p.page, 'plan', { state: 'error' });
		const text = await p.page.textContent('#view-plan .error');
		assert.match(text, /^422 /);
		assert.match(text, /model_type/);
		assertClean(p, { httpErrorsAllowed: true, sameOrigin: false });
		await p.page.close();
	});

	test('a table the plan gives as npy (too big for JSON) is listed without a Draw button', async () => {
		const p = await openPage(browser.context, '#plan');
		await planOf(p.page, config('mpt-7b.json'), 2048);
		const rows = await rowsOf(p.page);
		const alibi = rows.findIndex((r) => r[0] === 'alibi');
		assert.ok(alibi >= 0, JSON.stringify(rows));
		assert.match(rows[alibi][2], /[?&]format=npy/);
		assert.match(rows[alibi][9], /too large to draw/);
		assert.equal(await p.page.$(`#view-plan button.draw[data-index="${alibi}"]`), null);
		assertClean(p, { sameOrigin: false });
		await p.page.close();
	});
});
