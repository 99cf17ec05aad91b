/* posenc dashboard: "Why order matters", the view of GET /v1/analysis/order.
 *
 * Type a short sentence (or give a length), pick an encoding, shuffle: the view asks posencd for
 * self-attention on the sentence and on the shuffled sentence and draws the two attention
 * matrices side by side, with output_difference, the verdict (equivariant or not) and a sentence
 * saying what it means. Words become rows of X through the documented GET parameter tokens=:
 * each distinct word (lower-cased) gets an id 0, 1, 2, … in order of first appearance, and the
 * server's seeded generator gives row tokens[i], so a repeated word has the same vector. The
 * shuffle is the perm= parameter (the default is reversed order). Snippets: the same GET with curl,
 * and the JSON read into NumPy.
 *
 * Self-contained (app.js's View is not imported: app.js imports this file): it keeps the same
 * contract as the other views, data-state (idle, loading, ready, error) and data-url on the
 * section, which the browser tests wait on. */

import { ApiError, absoluteUrl, buildUrl, formatValue } from './api.js';
import { el } from './controls.js';
import { Heatmap } from './heatmap.js';
import { settleError, settleReady } from './view.js';
import { COLORMAPS } from './colormap.js';
import { snippetBox } from './snippets.js';

const PATH = '/v1/analysis/order';
const MAX_WORDS = 64;

/* The words of a sentence, lower-cased, and their token ids (distinct words numbered in order of
 * first appearance). */
export function tokenize(text) {
	const words = (text.toLowerCase().match(/[\p{L}\p{N}']+/gu) || []).slice(0, MAX_WORDS);
	const ids = new Map();
	const tokens = words.map((w) => {
		if (!ids.has(w)) ids.set(w, ids.size);
		return ids.get(w);
	});
	return { words, tokens };
}

const reversed = (n) => Array.from({ length: n }, (_, i) => n - 1 - i);

function shuffled(n) {
	const p = Array.from({ length: n }, (_, i) => i);
	for (let i = n - 1; i > 0; i--) {
		const j = Math.floor(Math.random() * (i + 1));
		[p[i], p[j]] = [p[j], p[i]];
	}
	return p;
}

const shq = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`;

const EXPLAIN = {
	none: 'Without a positional encoding, self-attention only compares the token vectors: shuffling the words shuffles the attention and the outputs with them and changes nothing else. The model cannot tell the two orders apart.',
	sinusoidal: 'The sinusoidal encoding adds a different vector to each position, so the same word at another place has another query and key: the shuffled sentence attends differently, and its outputs are not just the old ones reordered.',
	rope: 'RoPE rotates each query and key by an angle that grows with its position, so scores depend on how far apart two words are and in which direction: reordering changes the scores, not only their order.',
	alibi: 'ALiBi subtracts a penalty that grows with the distance |i − j|. Shuffling changes the distances between words, so the attention changes; but reversing keeps every distance, which leaves ALiBi blind to it (try the shuffle button).',
};

export class OrderView {
	constructor(catalogue) {
		this.root = document.getElementById('view-order');
		this.entry = catalogue.tables.find((t) => t.name === 'analysis/order');
		this.gen = 0;
		this.loaded = false;
		this.perm = null; /* null: reversed (the server's default) */
		this.build();
	}

	field(label, input, help) {
		const row = el('div', { class: 'field' }, el('label', { for: input.id, text: label }), input);
		if (help) row.append(el('small', { class: 'help', text: help }));
		return row;
	}

	build() {
		const encs = (this.entry.params.find((p) => p.name === 'encoding') || {}).choices || ['none'];
		this.encoding = el('select', { id: 'order-encoding', name: 'encoding' });
		for (const c of encs) this.encoding.append(el('option', { value: c, text: c }));
		this.encoding.value = encs.includes('rope') ? 'rope' : encs[0];
		this.sentence = el('input', { id: 'order-sentence', name: 'sentence', type: 'text', value: 'I love you', spellcheck: 'false' });
		this.len = el('input', { id: 'order-len', name: 'len', type: 'number', min: '1', max: '512', value: '8' });
		this.dim = el('input', { id: 'order-dim', name: 'dim', type: 'number', min: '2', max: '512', step: '2', value: '16' });
		this.seed = el('input', { id: 'order-seed', name: 'seed', type: 'number', min: '0', value: '0' });
		this.shuffleBtn = el('button', { type: 'button', name: 'shuffle', text: 'Shuffle' });
		this.reverseBtn = el('button', { type: 'button', name: 'reverse', text: 'Reverse' });
		this.permOut = el('output', { class: 'perm', 'aria-live': 'polite' });
		this.controls = el('form', { class: 'controls', 'aria-label': 'Why order matters: parameters', novalidate: true },
			el('h2', { text: 'Why order matters' }),
			el('p', { class: 'summary', text: 'Self-attention on a sentence and on the same words in another order, with and without a positional encoding.' }),
			this.field('encoding', this.encoding),
			this.field('sentence', this.sentence, 'each distinct word gets its own random vector; leave empty to use a length'),
			this.field('length', this.len, 'tokens, when the sentence is empty'),
			this.field('dim', this.dim, 'width of each word vector'),
			this.field('seed', this.seed, 'of the random word vectors'),
			el('div', { class: 'actions' }, this.shuffleBtn, this.reverseBtn, this.permOut),
			el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'primary', text: 'Draw' }),
				el('span', { class: 'status', role: 'status' })));
		this.controls.addEventListener('submit', (e) => { e.preventDefault(); this.refresh(); });
		for (const input of [this.sentence, this.len, this.dim, this.seed]) input.addEventListener('input', () => this.schedule());
		this.sentence.addEventListener('input', () => { this.perm = null; });
		this.len.addEventListener('input', () => { this.perm = null; });
		this.encoding.addEventListener('change', () => this.schedule(0));
		this.shuffleBtn.addEventListener('click', () => { this.perm = shuffled(this.count()); this.schedule(0); });
		this.reverseBtn.addEventListener('click', () => { this.perm = null; this.schedule(0); });
		this.error = el('div', { class: 'error', role: 'alert', hidden: true });
		this.figures = el('div', { class: 'figures', style: 'grid-template-columns: minmax(0, 1fr) minmax(0, 1fr)' });
		this.verdict = el('p', { class: 'verdict', 'aria-live': 'polite' });
		this.caption = el('p', { class: 'caption' });
		this.snip = snippetBox('Reproduce this figure');
		this.output = el('div', { class: 'output' }, this.error, this.figures, this.verdict, this.caption, this.snip.root);
		this.root.append(this.controls, this.output);
		this.heat = [this.figureBox('attention of the sentence'), this.figureBox('attention of the reordered sentence')];
	}

	figureBox(label) {
		const wrap = el('div', { class: 'figwrap square' });
		const readout = el('p', { class: 'readout', 'aria-live': 'polite' });
		this.figures.append(el('figure', { class: 'fig' }, wrap, readout));
		readout.textContent = 'Hover, or focus the figure and use the arrow keys, to read exact values.';
		return { fig: new Heatmap(wrap, { label, readout }), readout };
	}

	/* Words, or null when the sentence is empty (a length is used). */
	words() {
		const t = tokenize(this.sentence.value);
		return t.words.length ? t : null;
	}

	count() {
		const w = this.words();
		return w ? w.words.length : Math.max(1, Number(this.len.value) || 1);
	}

	pairs() {
		const w = this.words();
		const out = [['encoding', this.encoding.value]];
		if (w) out.push(['tokens', w.tokens.join(',')]);
		else out.push(['len', this.len.value]);
		out.push(['dim', this.dim.value]);
		if (this.seed.value !== '' && this.seed.value !== '0') out.push(['seed', this.seed.value]);
		if (this.perm && this.perm.length === this.count()) out.push(['perm', this.perm.join(',')]);
		return out;
	}

	schedule(delay = 300) {
		clearTimeout(this.timer);
		this.timer = setTimeout(() => this.refresh(), delay);
	}

	show() {
		if (!this.loaded) { this.loaded = true; this.refresh(); }
	}

	setStatus(text) {
		this.controls.querySelector('.status').textContent = text;
	}

	async refresh() {
		clearTimeout(this.timer);
		const gen = ++this.gen;
		const url = buildUrl(PATH, this.pairs());
		const words = this.words();
		this.root.dataset.state = 'loading';
		this.setStatus('Loading…');
		try {
			let resp;
			try {
				resp = await fetch(url, { headers: { Accept: 'application/json' } });
			} catch (e) {
				throw new ApiError(0, { title: 'Network error', detail: `${url}: ${e.message}` }, url);
			}
			const doc = await resp.json().catch(() => ({ title: `HTTP ${resp.status}` }));
			if (!resp.ok) throw new ApiError(resp.status, doc, url);
			if (gen !== this.gen) return;
			this.present(doc, words);
			this.snip.set(this.curl(url), this.python(url));
			settleReady(this, url);
			this.setStatus('');
		} catch (e) {
			if (gen !== this.gen) return;
			settleError(this, e, null);
			this.setStatus('');
		}
	}

	present(doc, words) {
		const n = doc.len, perm = doc.perm;
		const name = (i) => (words ? words.words[i] : `token ${i}`);
		const order = [Array.from({ length: n }, (_, i) => i), perm];
		const label = (o) => o.map(name).join(' ');
		/* one colour scale for both: attention weights are in [0, 1] */
		[doc.attention, doc.attention_permuted].forEach((m, k) => {
			const data = Float64Array.from(m.flat());
			this.heat[k].fig.show({
				data, dtype: 'f64', rows: n, cols: n, panels: 1, panelNames: [''], panel: 0,
				yName: 'query', xName: 'key', rowValue: (i) => i, colValue: (j) => j,
				title: `${k ? 'reordered' : 'original'}: ${label(order[k])}`.slice(0, 90),
				cmap: COLORMAPS.viridis, square: true, range: { lo: 0, hi: 1 }, format: (x) => formatValue(x, 'f64'),
			});
		});
		const diff = formatValue(doc.output_difference, 'f64');
		this.verdict.replaceChildren(
			el('strong', { text: doc.equivariant ? 'Order is invisible.' : 'Order matters.' }),
			` output difference max |out(reordered) − reorder(out)| = `, el('code', { class: 'difference', text: diff }),
			doc.equivariant ? ' (≤ 1e-9: the outputs are only reordered)' : ' (> 1e-9)');
		this.verdict.dataset.equivariant = String(doc.equivariant);
		this.permOut.textContent = `order: ${perm.join(', ')}`;
		this.caption.textContent = `${EXPLAIN[doc.encoding] || ''} Row i of a matrix is where word i looks (its softmax weights over the words).`;
	}

	curl(url) {
		return `curl -fsS ${shq(absoluteUrl(url))}`;
	}

	python(url) {
		return ['import json, urllib.request', 'import numpy as np', '',
			`with urllib.request.urlopen(${JSON.stringify(absoluteUrl(url))}) as r:`,
			'    doc = json.load(r)',
			'attention = np.array(doc["attention"])                    # [len, len]',
			'attention_permuted = np.array(doc["attention_permuted"])  # for X[perm]',
			'out, out_p = np.array(doc["output"]), np.array(doc["output_permuted"])',
			'print(np.abs(out_p - out[doc["perm"]]).max(), doc["output_difference"], doc["equivariant"])'].join('\n');
	}
}
