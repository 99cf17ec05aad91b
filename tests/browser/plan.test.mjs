/* The Model plan view in Chromium: a pasted config.json becomes the plan's table (the rows the API
 * answers, with their urls), one click draws an encoding (its canvas shows the table's values:
 * RoPE's cos(0) = 1 is the top of viridis), a dropped file is planned the same way, and a config
 * posenc does not know shows the 422's detail and the key it names, and a table the plan had to
 * give as npy is listed without a Draw button. The plan's fields of issue #34: encodings grouped
 * by tower (text, vision, audio) as the API labels them, kind none (NoPE) rows with their layer
 * indices, bias_scale on ALiBi rows, and a rank-1 table (a query scale) drawn as a line chart whose
 * values read back equal the API's. Run through run.sh. */

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
	ROOT, assertClean, getJson, httpPost, canvasInfo, cellCentre, hex, openPage, pixels, ready, screenshot, useBrowser,
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

/* The encodings' rows (not the tower headings), cells as text: kind, layers, layer_indices, url,
 * head_dim, rotary_dim, layout, bias_scale, attention_scaling, softmax_scale, notes, draw; in the
 * plan's order (data-index), whatever tower group each row is drawn in. */
const rowsOf = (page) => page.$$eval('#view-plan table.plan tbody tr.enc', (trs) => trs
	.sort((a, b) => a.dataset.index - b.dataset.index).map((tr) => [...tr.cells].map((td) => td.textContent)));
const COL = { kind: 0, layers: 1, indices: 2, url: 3, bias_scale: 7, softmax_scale: 9, draw: 11 };
/* The plan as the API answers it, outside the browser. */
async function apiPlan(name, len) {
	const r = await httpPost(`/v1/plan?len=${len}`, config(name));
	assert.equal(r.status, 200, name);
	return r.json();
}

describe('model plan', () => {
	test('a pasted Gemma 3 config is planned, listed and drawn with one click', async () => {
		const p = await openPage(browser.context, '#plan');
		const url = await planOf(p.page, config('gemma3-4b.json'), 16);
		assert.equal(url, '/v1/plan?len=16');
		const rows = await rowsOf(p.page);
		assert.equal(rows.length, 3); /* the text model's two tables, then the vision tower's learned one */
		assert.deepEqual(rows.map((r) => [r[0], r[1]]),
			[['rope', 'sliding_attention'], ['rope', 'full_attention'], ['learned', 'all']]);
		assert.match(rows[1][COL.url], /^\/v1\/rope\?len=16&.*scaling=linear&factor=8/);
		assert.equal(rows[1][COL.softmax_scale], '0.0625'); /* softmax_scale: query_pre_attn_scalar^-1/2 */
		const planned = rows[1][COL.url];
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
		assert.match(rows[alibi][COL.url], /[?&]format=npy/);
		assert.match(rows[alibi][COL.draw], /too large to draw/);
		assert.equal(await p.page.$(`#view-plan button.draw[data-index="${alibi}"]`), null);
		assertClean(p, { sameOrigin: false });
		await p.page.close();
	});
	test('encodings are grouped by tower as the API labels them (text, vision, audio)', async () => {
		const p = await openPage(browser.context, '#plan');
		/* each config with its own len: a new data-url tells the view has planned it */
		for (const [k, [name, towers]] of [['llava-1.5-7b.json', ['text', 'vision']], ['clip-vit-base-patch32.json', ['text', 'vision']], ['whisper-small.json', ['text', 'audio']]].entries()) {
			const api = await apiPlan(name, 16 + k);
			await planOf(p.page, config(name), 16 + k);
			const groups = await p.page.$$eval('#view-plan table.plan tbody', (bs) => bs.map((b) => ({
				tower: b.dataset.tower, heading: b.querySelector('tr.tower').textContent,
				rows: [...b.querySelectorAll('tr.enc')].map((tr) => ({ index: Number(tr.dataset.index), kind: tr.cells[0].textContent })),
			})));
			assert.deepEqual(groups.map((g) => g.tower), towers, name);
			for (const g of groups) {
				const want = api.encodings.map((e, i) => ({ index: i, kind: e.kind, tower: e.tower })).filter((e) => e.tower === g.tower);
				assert.deepEqual(g.rows, want.map(({ index, kind }) => ({ index, kind })), `${name}: ${g.tower}`);
				assert.equal(g.heading, `${g.tower} tower: ${want.length} encoding(s)`);
			}
			assert.match(await p.page.textContent('#view-plan table.plan caption'), new RegExp(`${api.encodings.length} encoding\\(s\\), ${towers.length} towers$`));
		}
		await screenshot(p.page, 'plan-towers');
		assertClean(p, { sameOrigin: false });
		await p.page.close();
	});

	test('NoPE layers are a kind none row with their layer indices, and no Draw button', async () => {
		const p = await openPage(browser.context, '#plan');
		for (const [k, name] of ['exaone-4.0-32b.json', 'smollm3-3b.json', 'c4ai-command-r7b-12-2024.json', 'llama4-scout.json'].entries()) {
			const api = await apiPlan(name, 16 + k);
			await planOf(p.page, config(name), 16 + k);
			const rows = await rowsOf(p.page);
			const shown = await p.page.$$eval('#view-plan tr.enc', (trs) => trs
				.sort((a, b) => a.dataset.index - b.dataset.index).map((tr) => tr.querySelector('td.layer-indices').dataset.values));
			api.encodings.forEach((e, i) => {
				const ids = Array.isArray(e.layer_indices) ? e.layer_indices : Array.isArray(e.layers) ? e.layers : null;
				assert.equal(shown[i], ids ? ids.join(',') : '', `${name} row ${i}`);
				assert.equal(rows[i][COL.kind], e.kind);
			});
			const none = api.encodings.findIndex((e) => e.kind === 'none');
			assert.ok(none >= 0, `${name} has NoPE layers`);
			assert.ok(shown[none].split(',').length > 1, shown[none]);
			assert.equal(rows[none][COL.draw], 'no positional encoding');
			assert.equal(await p.page.$(`#view-plan button.draw[data-index="${none}"]`), null);
		}
		assertClean(p, { sameOrigin: false });
		await p.page.close();
	});

	test('ALiBi rows show bias_scale as the API gives it', async () => {
		const p = await openPage(browser.context, '#plan');
		let alibiRows = 0;
		for (const [k, name] of ['bloom-560m.json', 'falcon-rw-1b.json', 'mpt-7b.json'].entries()) {
			const api = await apiPlan(name, 16 + k);
			await planOf(p.page, config(name), 16 + k);
			const rows = await rowsOf(p.page);
			api.encodings.forEach((e, i) => {
				if (e.kind !== 'alibi') return;
				alibiRows++;
				if (typeof e.bias_scale === 'number') assert.equal(Number(rows[i][COL.bias_scale]), e.bias_scale, name);
				else assert.equal(rows[i][COL.bias_scale], '—', name);
			});
		}
		assert.equal(alibiRows, 3);
		assertClean(p, { sameOrigin: false });
		await p.page.close();
	});

	test('a rank-1 encoding (a query scale) is drawn as a line chart with the API\'s values', async () => {
		const p = await openPage(browser.context, '#plan');
		await p.page.waitForSelector('#plan-config');
		/* The plan's query_scale when this daemon serves /v1/rope/query-scale; else any rank-1 table stands in for it. */
		const cat = await getJson('/v1');
		const served = cat.tables.some((t) => t.name === 'rope/query-scale');
		let url, index;
		if (served) {
			const api = await apiPlan('llama4-scout.json', 64);
			index = api.encodings.findIndex((e) => e.kind === 'query_scale');
			assert.ok(index >= 0 && api.encodings[index].url, 'llama4-scout plans a query scale with a url');
			url = api.encodings[index].url;
			await planOf(p.page, config('llama4-scout.json'), 64);
		} else {
			/* the plan still lists the query scale, without a url and so without a Draw button */
			const api = await apiPlan('ministral-3-8b-instruct-2512.json', 64);
			const q = api.encodings.findIndex((e) => e.kind === 'query_scale');
			assert.ok(q >= 0, 'ministral-3 plans a query scale');
			await planOf(p.page, config('ministral-3-8b-instruct-2512.json'), 64);
			const rows = await rowsOf(p.page);
			assert.equal(rows[q][COL.kind], 'query_scale');
			assert.equal(rows[q][COL.url], '—');
			assert.equal(await p.page.$(`#view-plan button.draw[data-index="${q}"]`), null);
			url = '/v1/alibi/slopes?heads=12';
			index = 0;
			await p.page.evaluate((u) => window.posencDashboard.plan.render(window.posencDashboard.plan.last = {
				model_type: 'stand-in', warnings: [],
				encodings: [{ kind: 'query_scale', tower: 'text', layers: 'all', url: u, notes: [] }],
			}), url);
		}
		const old = await p.page.evaluate(() => document.getElementById('view-plan').dataset.url);
		await p.page.click(`#view-plan button.draw[data-index="${index}"]`);
		assert.equal(await ready(p.page, 'plan', { changedFrom: old }), `${url}&format=bin`);
		const want = (await getJson(url)).data;
		assert.equal(await p.page.isVisible('#view-plan .figwrap.line canvas.plot'), true);
		assert.equal(await p.page.isVisible('#view-plan .figwrap.heat canvas.plot'), false);
		/* the chart's cursor walks the positions: each value read back is the API's */
		await p.page.focus('#view-plan .figwrap.line canvas.plot');
		const seen = [];
		for (let i = 0; i < Math.min(want.length, 12); i++) {
			if (i > 0) await p.page.keyboard.press('ArrowRight');
			seen.push(Number(await p.page.textContent('#view-plan .figwrap.line ~ .readout output.value')));
		}
		seen.forEach((v, i) => assert.ok(Math.abs(v - want[i]) <= 1e-6 * Math.abs(want[i]), `position ${i}: ${v} vs ${want[i]}`));
		assertClean(p, { sameOrigin: false });
		await p.page.close();
	});
});
