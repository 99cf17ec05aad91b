/* Browser-test harness for the dashboard: Debian's Chromium driven by playwright-core, against the
 * posencd that run.sh started (its origin is in PE_BROWSER_ORIGIN).
 *
 * The machine has no network, so Chromium runs with every background service off (without those
 * flags it hangs on connection attempts) and a fresh user-data-dir per run. Every request the page
 * makes passes a route that lets through only the daemon's origin; anything else is aborted and
 * recorded in `blocked`, and the tests assert that list stays empty. Console errors, page errors,
 * failed requests and HTTP error statuses are recorded per page.
 *
 * Every test file starts the same way: `const browser = useBrowser();` (one browser for the file,
 * launched before its first test and closed after its last) and checks each page with
 * assertClean(p) once the test is done with it.
 *
 * Also here: the reference viridis table read from src/tensor/colormap.c (matplotlib's published
 * values, independent of the dashboard's own copy), a .npy reader, and pixel helpers. */

import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const ORIGIN = process.env.PE_BROWSER_ORIGIN;
export const OUT = process.env.PE_BROWSER_OUT || path.join(ROOT, 'build/browser');
if (!ORIGIN) throw new Error('PE_BROWSER_ORIGIN is not set: run tests/browser/run.sh');

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
	'--disable-background-networking', '--disable-component-update', '--disable-sync'];

export const blocked = [];

/* One persistent context (fresh profile directory) for the whole file. */
export async function launch() {
	const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'posenc-chromium-'));
	const context = await chromium.launchPersistentContext(profile, {
		executablePath: process.env.PE_CHROMIUM || '/usr/bin/chromium',
		headless: true,
		args: ARGS,
		viewport: { width: 1280, height: 800 },
		deviceScaleFactor: 1,
		timeout: 30000,
	});
	await context.route('**/*', (route) => {
		const url = route.request().url();
		if (new URL(url).origin === ORIGIN) return route.continue();
		blocked.push(url);
		return route.abort('blockedbyclient');
	});
	return {
		context,
		async close() {
			await context.close();
			fs.rmSync(profile, { recursive: true, force: true });
		},
	};
}

/* The file's browser: launch() before its first test, closed after its last. The returned object's
 * context is the persistent context once the first test runs. */
export function useBrowser() {
	const browser = { context: null };
	let handle;
	before(async () => {
		handle = await launch();
		browser.context = handle.context;
	});
	after(async () => { if (handle) await handle.close(); });
	return browser;
}

/* Everything that must hold for a page after a test: no page error, no console error or warning
 * (4xx ones allowed with httpErrorsAllowed), no failed request, no HTTP error response (unless
 * allowed), no request to another origin (sameOrigin: false skips that list) and nothing aborted
 * by the origin guard. */
export function assertClean({ problems, requests }, { httpErrorsAllowed = false, sameOrigin = true } = {}) {
	assert.deepEqual(problems.pageErrors, [], 'uncaught page errors');
	assert.deepEqual(problems.console.filter((m) => !(httpErrorsAllowed && /status of 4\d\d/.test(m))), [], 'console errors or warnings');
	assert.deepEqual(problems.failed, [], 'failed requests');
	if (!httpErrorsAllowed) assert.deepEqual(problems.httpErrors, [], 'HTTP error responses');
	if (sameOrigin) {
		const foreign = requests.filter((u) => new URL(u).origin !== ORIGIN && !u.startsWith('data:'));
		assert.deepEqual(foreign, [], 'requests to another origin');
	}
	assert.deepEqual(blocked, [], 'requests aborted by the origin guard');
}

/* A new page with its problems recorded: {page, problems: {console, pageErrors, failed, httpErrors}, requests}. */
export async function openPage(context, hash = '') {
	const page = await context.newPage();
	const problems = { console: [], pageErrors: [], failed: [], httpErrors: [] };
	const requests = [];
	page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.console.push(`${m.type()}: ${m.text()}`); });
	page.on('pageerror', (e) => problems.pageErrors.push(e.message));
	page.on('request', (r) => requests.push(r.url()));
	page.on('requestfailed', (r) => problems.failed.push(`${r.url()}: ${r.failure() && r.failure().errorText}`));
	page.on('response', (r) => { if (r.status() >= 400) problems.httpErrors.push(`${r.status()} ${r.url()}`); });
	await page.goto(`${ORIGIN}/${hash}`);
	return { page, problems, requests };
}

/* Wait until view (tables, similarity, decay, compat) has drawn; returns its data-url. */
export async function ready(page, view, { state = 'ready', changedFrom, urlIncludes } = {}) {
	await page.waitForFunction(([v, s, old, part]) => {
		const e = document.getElementById(`view-${v}`);
		return e && e.dataset.state === s && (old === undefined || e.dataset.url !== old) &&
			(part === undefined || (e.dataset.url || '').includes(part));
	}, [view, state, changedFrom, urlIncludes], { timeout: 10000 });
	return page.evaluate((v) => document.getElementById(`view-${v}`).dataset.url, view);
}

export async function screenshot(page, name) {
	fs.mkdirSync(OUT, { recursive: true });
	await page.screenshot({ path: path.join(OUT, `${name}.png`) });
}

/* The dataset of a view's canvas number `index` (0: the first figure). */
export async function canvasInfo(page, view, index = 0) {
	return page.evaluate(([v, i]) => {
		const c = document.querySelectorAll(`#view-${v} canvas.plot`)[i];
		const r = c.getBoundingClientRect();
		return { ...c.dataset, left: r.left, top: r.top };
	}, [view, index]);
}

/* A copy of a view's canvas made for reading back (so the page's own canvas is never read, which
 * would make Chromium warn about repeated readbacks), evaluated in the page as `snap`. */
const SNAP = `const c = document.querySelectorAll('#view-' + v + ' canvas.plot')[i];
	const copy = document.createElement('canvas');
	copy.width = c.width; copy.height = c.height;
	const snap = copy.getContext('2d', { willReadFrequently: true });
	snap.drawImage(c, 0, 0);`;

/* RGB of pixels [[x, y], ...] (CSS pixels = device pixels at scale 1) of a view's canvas. */
export async function pixels(page, view, points, index = 0) {
	return page.evaluate(new Function('[v, pts, i]', `${SNAP}
		return pts.map(([x, y]) => Array.from(snap.getImageData(Math.round(x), Math.round(y), 1, 1).data.slice(0, 3)));`),
	[view, points, index]);
}

/* RGBA bytes of the rectangle [x, y, w, h] of a view's canvas (sent over as base64: a plain
 * array of a million numbers takes seconds to serialise). */
export async function region(page, view, rect, index = 0) {
	const b64 = await page.evaluate(new Function('[v, r, i]', `${SNAP}
		const d = snap.getImageData(r[0], r[1], r[2], r[3]).data;
		let s = '';
		for (let k = 0; k < d.length; k += 8192) s += String.fromCharCode.apply(null, d.subarray(k, k + 8192));
		return btoa(s);`), [view, rect, index]);
	return new Uint8Array(Buffer.from(b64, 'base64'));
}

/* The centre of cell (r, c) of a box [x, y, w, h] for a rows x cols table. */
export function cellCentre(box, rows, cols, r, c) {
	const [x, y, w, h] = box;
	return [Math.floor(x + (c + 0.5) * w / cols), Math.floor(y + (r + 0.5) * h / rows)];
}

/* matplotlib's viridis as published (src/tensor/colormap.c), 256 [r, g, b]. */
export function referenceViridis() {
	const src = fs.readFileSync(path.join(ROOT, 'src/tensor/colormap.c'), 'utf8');
	const body = src.split('pe_cmap_viridis_rgb[256][3] = {')[1].split('};')[0];
	const rows = [...body.matchAll(/\{(\d+), (\d+), (\d+)\}/g)].map((m) => [Number(m[1]), Number(m[2]), Number(m[3])]);
	if (rows.length !== 256) throw new Error(`viridis table has ${rows.length} entries`);
	return rows;
}

/* matplotlib's rule: entry min(floor(t * n), n - 1) of t = (v - lo) / (hi - lo). */
export function viridisIndex(v, lo, hi) {
	const t = hi > lo ? (v - lo) / (hi - lo) : 0;
	if (!(t > 0)) return 0;
	return Math.min(255, Math.floor(t * 256));
}

/* Nearest viridis entry to an RGB colour. */
export function nearestIndex(table, rgb) {
	let best = 0, bd = Infinity;
	table.forEach((c, i) => {
		const d = (c[0] - rgb[0]) ** 2 + (c[1] - rgb[1]) ** 2 + (c[2] - rgb[2]) ** 2;
		if (d < bd) { bd = d; best = i; }
	});
	return best;
}

export function hex(rgb) {
	return `#${rgb.map((v) => v.toString(16).padStart(2, '0')).join('')}`;
}

/* GET from the daemon outside the browser: {status, headers, body (Buffer), json()}. node:http
 * with no agent (Connection: close), so no kept-alive socket holds the test process open after the
 * last test, as fetch's pool would for the daemon's keep-alive time. */
export function httpGet(url) {
	return new Promise((resolve, reject) => {
		http.get(new URL(url, ORIGIN), { agent: false }, (res) => {
			const chunks = [];
			res.on('data', (c) => chunks.push(c));
			res.on('end', () => {
				const body = Buffer.concat(chunks);
				resolve({ status: res.statusCode, headers: res.headers, body, json: () => JSON.parse(body.toString('utf8')) });
			});
			res.on('error', reject);
		}).on('error', reject);
	});
}

/* POST body (a string) to the daemon with Content-Type type: {status, headers, body, json()}; no
 * agent, as httpGet. */
export function httpPost(url, body, type = 'application/json') {
	return new Promise((resolve, reject) => {
		const req = http.request(new URL(url, ORIGIN), { method: 'POST', agent: false, headers: { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) } }, (res) => {
			const chunks = [];
			res.on('data', (c) => chunks.push(c));
			res.on('end', () => {
				const buf = Buffer.concat(chunks);
				resolve({ status: res.statusCode, headers: res.headers, body: buf, json: () => JSON.parse(buf.toString('utf8')) });
			});
			res.on('error', reject);
		});
		req.on('error', reject);
		req.end(body);
	});
}

export async function getJson(url) {
	const r = await httpGet(url);
	if (r.status !== 200) throw new Error(`${r.status} ${url}`);
	return r.json();
}

/* A .npy file (format 1.0/2.0, little-endian f4/f8/i4, C order): {shape, data}. */
export function parseNpy(buf) {
	const u8 = new Uint8Array(buf.buffer ? buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) : buf);
	if (u8[0] !== 0x93 || String.fromCharCode(...u8.slice(1, 6)) !== 'NUMPY') throw new Error('not a .npy file');
	const major = u8[6];
	const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
	const hlen = major === 1 ? dv.getUint16(8, true) : dv.getUint32(8, true);
	const start = major === 1 ? 10 : 12;
	const header = new TextDecoder().decode(u8.slice(start, start + hlen));
	const descr = header.match(/'descr':\s*'([^']+)'/)[1];
	if (/'fortran_order':\s*True/.test(header)) throw new Error('fortran order');
	const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
	const off = start + hlen, n = shape.reduce((a, b) => a * b, 1);
	const read = { '<f4': [4, (o) => dv.getFloat32(o, true), Float32Array], '<f8': [8, (o) => dv.getFloat64(o, true), Float64Array], '<i4': [4, (o) => dv.getInt32(o, true), Int32Array] }[descr];
	if (!read) throw new Error(`dtype ${descr}`);
	const data = new read[2](n);
	for (let i = 0; i < n; i++) data[i] = read[1](off + i * read[0]);
	return { shape, descr, data };
}
