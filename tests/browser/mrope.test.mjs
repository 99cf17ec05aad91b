/* The M-RoPE view (src/dashboard/mrope.js) in a real browser: it draws the three position rows of a
 * text+image+video sequence as /v1/rope/mrope/positions gives them, the kinds of its tokens (with
 * Qwen3-VL's timestamped video frames), and
 * which frequency follows which row, for sections in order (Qwen2-VL) and interleaved (Qwen3-VL);
 * the expected maps are built here from transformers' two constructions (the chunk split of
 * cat(freqs, freqs), apply_interleaved_mrope's slices), not from the view's rule. An API error
 * shows its problem and marks the parameter. Run through tests/browser/run.sh. */

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
	assertClean, canvasInfo, getJson, httpGet, openPage, parseNpy, ready, screenshot, useBrowser,
} from './harness.mjs';

const SEGMENTS = 'text:4,image:1x8x8,text:2,video:3x8x8,text:3';
const browser = useBrowser();

/* transformers' split (Qwen2-VL): channels cut into mrope_section * 2 chunks, chunk i from row i % 3;
 * the first dim/2 channels are the frequencies. */
function chunkMap(sec) {
	const rows = [];
	[...sec, ...sec].forEach((n, i) => { for (let k = 0; k < n; k++) rows.push(i % 3); });
	return rows.slice(0, rows.length / 2);
}

/* apply_interleaved_mrope (Qwen3-VL): row t everywhere, then h on 1::3 and w on 2::3 below 3·section. */
function interleavedMap(sec, half) {
	const rows = new Array(half).fill(0);
	for (const [row, offset] of [[1, 1], [2, 2]]) for (let k = offset; k < sec[row] * 3; k += 3) rows[k] = row;
	return rows;
}

const values = (page, n) => page.$$eval('#view-mrope canvas.strip', (cs, i) => cs[i].dataset.values.split(',').map(Number), n);

describe('M-RoPE view', () => {
	test('draws the position rows, the token kinds and the section map of the API', async () => {
		const p = await openPage(browser.context, '#mrope');
		const url = await ready(p.page, 'mrope');
		const [posUrl, tableUrl] = url.split(' ');
		assert.match(posUrl, /^\/v1\/rope\/mrope\/positions\?segments=[^&]+&format=bin$/);
		assert.match(tableUrl, /^\/v1\/rope\/mrope\?.*mrope_section=4%2C6%2C6.*&format=bin$|^\/v1\/rope\/mrope\?.*mrope_section=4,6,6.*&format=bin$/);
		const q = `segments=${encodeURIComponent(SEGMENTS)}`;
		const doc = await getJson(`/v1/rope/mrope/positions?${q}`);
		const pos = parseNpy((await httpGet(`/v1/rope/mrope/positions?${q}&format=npy`)).body);
		const seq = pos.shape[1];
		assert.equal(seq, 4 + 16 + 2 + 48 + 3);
		/* the rows chart covers the API's positions */
		const info = await canvasInfo(p.page, 'mrope', 0);
		assert.ok(Number(info.hi) >= Math.max(...pos.data) && Number(info.lo) <= 0, `${info.lo} … ${info.hi}`);
		assert.ok((await p.page.textContent('#view-mrope .caption')).includes(`largest position ${Math.max(...pos.data)}:`));
		assert.equal(await p.page.getAttribute('#view-mrope', 'data-delta'), String(doc.mrope_position_delta));
		assert.ok((await p.page.textContent('#view-mrope .caption')).includes(`mrope_position_delta = ${doc.mrope_position_delta}`));
		/* the sequence strip: 4 text, 16 image, 2 text, 48 video, 3 text */
		const kinds = await values(p.page, 0);
		assert.deepEqual(kinds, [...Array(4).fill(0), ...Array(16).fill(1), ...Array(2).fill(0), ...Array(48).fill(2), ...Array(3).fill(0)]);
		/* text tokens have equal rows; image tokens share t */
		for (let i = 0; i < seq; i++) if (kinds[i] === 0) assert.ok(pos.data[i] === pos.data[seq + i] && pos.data[i] === pos.data[2 * seq + i]);
		/* the section map, in order */
		assert.deepEqual(await values(p.page, 1), chunkMap([4, 6, 6]));
		/* the cos heatmap is the table's [seq, dim] */
		const heat = await canvasInfo(p.page, 'mrope', 1);
		assert.equal(Number(heat.rows), seq);
		assert.equal(Number(heat.cols), 32);
		await screenshot(p.page, 'mrope');
		assertClean(p);
		await p.page.close();
	});

	test('interleaved sections (Qwen3-VL) and a Qwen2.5-VL video redraw', async () => {
		const p = await openPage(browser.context, '#mrope');
		let url = await ready(p.page, 'mrope');
		await p.page.fill('#view-mrope input[name="mrope_section"]', '6,5,5');
		await p.page.check('#view-mrope input[name="interleaved"]');
		/* the two changes may be drawn apart (the redraw waits 300 ms after each): wait for both */
		url = await ready(p.page, 'mrope', { changedFrom: url, urlIncludes: 'interleaved=1' });
		assert.deepEqual(await values(p.page, 1), interleavedMap([6, 5, 5], 16));
		await p.page.selectOption('#view-mrope select[name="variant"]', 'qwen25vl');
		await p.page.fill('#view-mrope input[name="tokens_per_second"]', '25');
		url = await ready(p.page, 'mrope', { changedFrom: url, urlIncludes: 'tokens_per_second=25' });
		const doc = await getJson(`/v1/rope/mrope/positions?segments=${encodeURIComponent(SEGMENTS)}&variant=qwen25vl&tokens_per_second=25`);
		assert.equal(await p.page.getAttribute('#view-mrope', 'data-delta'), String(doc.mrope_position_delta));
		assert.ok((await p.page.textContent('#view-mrope .caption')).includes(`largest position ${Math.max(...doc.data.flat())}:`));
		assertClean(p);
		await p.page.close();
	});

	test('Qwen3-VL: each video frame behind its timestamp text', async () => {
		const p = await openPage(browser.context, '#mrope');
		let url = await ready(p.page, 'mrope');
		assert.equal(await p.page.isVisible('#view-mrope input[name="timestamp_tokens"]'), false);
		await p.page.selectOption('#view-mrope select[name="variant"]', 'qwen3vl');
		await p.page.fill('#view-mrope input[name="timestamp_tokens"]', '5,6,7');
		url = await ready(p.page, 'mrope', { changedFrom: url });
		assert.match(url, /variant=qwen3vl&timestamp_tokens=5%2C6%2C7|variant=qwen3vl&timestamp_tokens=5,6,7/);
		/* Qwen3-VL's processor: each of the video's 3 frames is `<t seconds>` (5, 6, 7 tokens),
		 * <|vision_start|>, its 16 tokens, <|vision_end|> */
		const frames = [5, 6, 7].flatMap((n) => [...Array(n + 1).fill(0), ...Array(16).fill(2), 0]);
		const want = [...Array(4).fill(0), ...Array(16).fill(1), ...Array(2).fill(0), ...frames, ...Array(3).fill(0)];
		assert.deepEqual(await values(p.page, 0), want);
		const q = `segments=${encodeURIComponent(SEGMENTS)}&variant=qwen3vl&timestamp_tokens=5,6,7`;
		const doc = await getJson(`/v1/rope/mrope/positions?${q}`);
		const pos = parseNpy((await httpGet(`/v1/rope/mrope/positions?${q}&format=npy`)).body);
		const seq = pos.shape[1];
		assert.equal(seq, want.length);
		assert.equal(await p.page.getAttribute('#view-mrope', 'data-delta'), String(doc.mrope_position_delta));
		/* every frame at time 0 of its own block: t is the frame's smallest h and w */
		for (let i = 0; i < seq; i++) {
			if (want[i] !== 2 || want[i - 1] === 2) continue;
			const t = pos.data[i];
			for (let j = i; want[j] === 2; j++) {
				assert.equal(pos.data[j], t);
				assert.ok(pos.data[seq + j] >= t && pos.data[2 * seq + j] >= t);
			}
			assert.equal(pos.data[seq + i], t);
			assert.equal(pos.data[i - 1], t - 1); /* one past its <|vision_start|> */
		}
		assertClean(p, { httpErrorsAllowed: true }); /* variant=qwen3vl before timestamp_tokens is filled: a 400 */
		await p.page.close();
	});

	test('a bad section is the API problem, naming mrope_section', async () => {
		const p = await openPage(browser.context, '#mrope');
		await ready(p.page, 'mrope');
		await p.page.fill('#view-mrope input[name="mrope_section"]', '1,2,3');
		await ready(p.page, 'mrope', { state: 'error' });
		const problem = (await httpGet(`/v1/rope/mrope?segments=${encodeURIComponent(SEGMENTS)}&mrope_section=1,2,3&dim=32`)).json();
		assert.equal(problem.param, 'mrope_section');
		const shown = await p.page.textContent('#view-mrope .error');
		assert.ok(shown.includes(problem.detail), `"${shown}" shows "${problem.detail}"`);
		assert.equal(await p.page.getAttribute('#view-mrope input[name="mrope_section"]', 'aria-invalid'), 'true');
		await p.page.fill('#view-mrope input[name="mrope_section"]', '4,6,6');
		await ready(p.page, 'mrope');
		assert.equal(await p.page.isVisible('#view-mrope .error'), false);
		assertClean(p, { httpErrorsAllowed: true });
		await p.page.close();
	});
});
