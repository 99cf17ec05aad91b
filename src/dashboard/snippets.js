/* posenc dashboard: copyable curl commands and Python snippets for exactly what is on screen.
 *
 * The page draws from format=bin requests; the snippets ask the same URL (same parameters, same
 * order, same origin) with format=npy, so `np.load` gets the identical float32 values with their
 * shape. A view passes its requests as [{url, file}] and, where the figure is computed from
 * several tables (exact vs hf), the Python expression that combines them. Copy uses the Clipboard
 * API where the page is a secure context (https, localhost) and falls back to selecting the text
 * and execCommand('copy') elsewhere (plain http inside a cluster). */

import { absoluteUrl, withFormat } from './api.js';
import { el } from './controls.js';

/* Single-quote a string for a POSIX shell. */
function shq(s) {
	return `'${String(s).replace(/'/g, `'\\''`)}'`;
}

/* Python string literal. */
function pyq(s) {
	return JSON.stringify(String(s));
}

/* requests: [{url (the page's, format=bin), file, name}]; combine: Python lines using the names. */
export function curlText(requests) {
	return requests.map((q) => `curl -fsS -o ${q.file} ${shq(absoluteUrl(withFormat(q.url, 'npy')))}`).join('\n');
}

export function pythonText(requests, combine = []) {
	const lines = ['import io, urllib.request', 'import numpy as np', ''];
	lines.push('def get(url):', '    with urllib.request.urlopen(url) as r:', '        return np.load(io.BytesIO(r.read()))', '');
	for (const q of requests) lines.push(`${q.name} = get(${pyq(absoluteUrl(withFormat(q.url, 'npy')))})${q.comment ? `  # ${q.comment}` : ''}`);
	if (combine.length) lines.push(...combine);
	return lines.join('\n');
}

/* A snippet block: heading, <pre>, copy button, status. Returns {root, set(curl, python)}. */
export function snippetBox(title) {
	const box = el('section', { class: 'snippets', 'aria-label': title });
	box.append(el('h2', { text: title }));
	const parts = {};
	for (const [key, label] of [['curl', 'Shell (curl)'], ['python', 'Python (NumPy)']]) {
		const pre = el('pre', { class: `snippet snippet-${key}`, tabindex: '0', 'aria-label': `${label} snippet` });
		const code = el('code');
		pre.append(code);
		const status = el('span', { class: 'copy-status', role: 'status' });
		const btn = el('button', { type: 'button', class: 'copy', text: `Copy ${key === 'curl' ? 'curl' : 'Python'}` });
		btn.addEventListener('click', () => copy(code.textContent, pre, status));
		box.append(el('div', { class: 'snippet-head' }, el('h3', { text: label }), btn, status), pre);
		parts[key] = code;
	}
	return {
		root: box,
		set(curl, python) {
			parts.curl.textContent = curl;
			parts.python.textContent = python;
		},
	};
}

async function copy(text, pre, status) {
	let ok = false;
	try {
		if (navigator.clipboard && window.isSecureContext) {
			await navigator.clipboard.writeText(text);
			ok = true;
		}
	} catch (e) {
		ok = false;
	}
	if (!ok) {
		const range = document.createRange();
		range.selectNodeContents(pre);
		const sel = window.getSelection();
		sel.removeAllRanges();
		sel.addRange(range);
		try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
	}
	status.textContent = ok ? 'Copied' : 'Selected: press Ctrl+C to copy';
	setTimeout(() => { status.textContent = ''; }, 2500);
}
