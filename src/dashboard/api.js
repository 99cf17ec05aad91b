/* posenc dashboard: talking to posencd.
 *
 * Every request goes to the page's own origin (relative URLs only), so the dashboard works on an
 * air-gapped cluster and behind any reverse proxy that serves it. Tables are fetched as raw
 * little-endian binary (format=bin) and decoded into typed arrays; the shape comes from the
 * X-PE-Shape header and the element type from X-PE-Dtype (T5 buckets are i32, everything else
 * f32 unless asked). Failed requests become an ApiError carrying the problem+json fields
 * (title, detail, param), so the page can show them and mark the offending control.
 *
 * No request is ever aborted: a newer request simply wins (callers compare a generation number),
 * which keeps the browser's network log free of cancelled requests. */

export class ApiError extends Error {
	constructor(status, problem, url) {
		const detail = (problem && (problem.detail || problem.title)) || `HTTP ${status}`;
		super(detail);
		this.name = 'ApiError';
		this.status = status;
		this.title = (problem && problem.title) || `HTTP ${status}`;
		this.detail = detail;
		this.param = (problem && problem.param) || null;
		this.url = url;
	}
}

/* A problem+json body if there is one, else a stand-in built from the status line. */
async function problemOf(resp) {
	const type = resp.headers.get('Content-Type') || '';
	try {
		if (type.includes('json')) return await resp.json();
		const text = (await resp.text()).trim();
		return { title: resp.statusText || `HTTP ${resp.status}`, detail: text.slice(0, 300) || undefined };
	} catch (e) {
		return { title: `HTTP ${resp.status}` };
	}
}

async function get(url, accept) {
	let resp;
	try {
		resp = await fetch(url, { headers: { Accept: accept } });
	} catch (e) {
		throw new ApiError(0, { title: 'Network error', detail: `${url}: ${e.message}` }, url);
	}
	if (!resp.ok) throw new ApiError(resp.status, await problemOf(resp), url);
	return resp;
}

/* GET a JSON answer (a problem is thrown as ApiError). */
export async function getJson(url) {
	return (await get(url, 'application/json')).json();
}

/* GET /v1: {version, tables: [{name, path, summary, params: [...]}], transforms: [...]}. */
export async function getCatalogue() {
	return getJson('/v1');
}

/* A relative URL: path plus the [name, value] pairs in order, empty values left out. */
export function buildUrl(path, pairs) {
	const q = pairs
		.filter(([, v]) => v !== '' && v !== null && v !== undefined)
		.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v)).replace(/%2C/g, ',')}`)
		.join('&');
	return q ? `${path}?${q}` : path;
}

/* The same URL with format=... replaced (or added). */
export function withFormat(url, format) {
	const [path, query = ''] = url.split('?');
	const pairs = query ? query.split('&').filter((kv) => !kv.startsWith('format=')) : [];
	pairs.push(`format=${format}`);
	return `${path}?${pairs.join('&')}`;
}

export function absoluteUrl(url) {
	return new URL(url, window.location.href).href;
}

/* Half-precision bit patterns to numbers (f16 IEEE binary16, bf16 the top half of an f32). */
function f16ToNumber(h) {
	const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	if (e === 0) return s * m * 2 ** -24;
	if (e === 31) return m ? NaN : s * Infinity;
	return s * (1 + m / 1024) * 2 ** (e - 15);
}

/* Decode little-endian elements of dtype from an ArrayBuffer into a typed array. */
export function decode(buf, dtype) {
	const dv = new DataView(buf);
	const make = (Ctor, size, read) => {
		const n = Math.floor(buf.byteLength / size), out = new Ctor(n);
		for (let i = 0; i < n; i++) out[i] = read(i * size);
		return out;
	};
	switch (dtype) {
	case 'f32': return make(Float32Array, 4, (o) => dv.getFloat32(o, true));
	case 'f64': return make(Float64Array, 8, (o) => dv.getFloat64(o, true));
	case 'i32': return make(Int32Array, 4, (o) => dv.getInt32(o, true));
	case 'f16': return make(Float32Array, 2, (o) => f16ToNumber(dv.getUint16(o, true)));
	case 'bf16': {
		const tmp = new DataView(new ArrayBuffer(4));
		return make(Float32Array, 2, (o) => { tmp.setUint32(0, dv.getUint16(o, true) << 16); return tmp.getFloat32(0); });
	}
	default: throw new ApiError(0, { title: 'Unsupported dtype', detail: `X-PE-Dtype ${dtype}` }, '');
	}
}

/* GET a table as binary: {url, shape, dtype, data, attentionScaling}. url must ask for format=bin. */
export async function fetchTensor(url) {
	const resp = await get(url, 'application/octet-stream');
	const shapeHeader = resp.headers.get('X-PE-Shape');
	const dtype = resp.headers.get('X-PE-Dtype') || 'f32';
	const buf = await resp.arrayBuffer();
	const shape = shapeHeader === null || shapeHeader === '' ? [] : shapeHeader.split(',').map(Number);
	const data = decode(buf, dtype);
	const count = shape.reduce((a, b) => a * b, 1);
	if (data.length !== count)
		throw new ApiError(0, { title: 'Bad response', detail: `${url}: ${data.length} elements for shape [${shape}]` }, url);
	const scaling = resp.headers.get('X-PE-Attention-Scaling');
	return { url, shape, dtype, data, attentionScaling: scaling === null ? null : Number(scaling) };
}

/* The shortest decimal that reads back to exactly v in dtype: what the API's JSON prints. */
export function formatValue(v, dtype) {
	if (Number.isNaN(v)) return 'NaN';
	if (!Number.isFinite(v)) return v > 0 ? 'Infinity' : '-Infinity';
	if (Object.is(v, -0)) return '-0';
	if (dtype !== 'f32' || Number.isInteger(v)) return String(v); /* f64, i32: JS prints shortest */
	for (let p = 1; p < 9; p++) {
		const s = v.toPrecision(p);
		if (Math.fround(Number(s)) === v) return String(Number(s));
	}
	return String(Number(v.toPrecision(9))); /* 9 digits always read back to the same f32 */
}
