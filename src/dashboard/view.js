/* posenc dashboard: the view skeleton every view with a parameter form shares: controls on the
 * left, then error, figure(s), caption and curl/Python snippets. A view says what to fetch
 * (requests(): [{url, file, name}], format=bin tables; {url, json: true} for a JSON answer it reads
 * but does not draw, kept out of the snippets) and how to draw it (present(tables, requests,
 * jsons)); refresh() fetches them all, keeps data-state (idle, loading, ready, error) and data-url
 * (the tables drawn) on the view element, and shows an API problem with the parameter it names. */

import { ApiError, fetchTensor, getJson } from './api.js';
import { el } from './controls.js';
import { Heatmap } from './heatmap.js';
import { LineChart } from './charts.js';
import { snippetBox, curlText, pythonText } from './snippets.js';

/* A problem (ApiError) or any other error into box: title, detail and the parameter it names,
 * marked on form when form has a control for it. */
export function showProblem(box, e, form) {
	box.replaceChildren();
	if (e instanceof ApiError) {
		box.append(el('strong', { text: e.status ? `${e.status} ${e.title}` : e.title }), ': ', e.detail);
		if (e.param) {
			const marked = form && form.markInvalid(e.param);
			box.append(' (parameter ', el('code', { text: e.param }), marked ? ', marked below)' : ')');
		}
	} else {
		box.append(el('strong', { text: 'Error' }), ': ', String(e && e.message ? e.message : e));
	}
}

/* A view's answer is shown: its error box hidden, its output no longer stale, the urls it shows on
 * its root (url: what the browser tests read) and its state ready. */
export function settleReady(view, url) {
	view.error.hidden = true;
	view.output.classList.remove('stale');
	view.root.dataset.url = url;
	view.root.dataset.state = 'ready';
}

/* A view's request failed: the problem in its error box (its parameter marked on form, when given),
 * the output left in place but stale, the state error. */
export function settleError(view, e, form) {
	showProblem(view.error, e, form);
	view.error.hidden = false;
	view.output.classList.add('stale');
	view.root.dataset.state = 'error';
}

export class View {
	constructor(id, title) {
		this.root = document.getElementById(id);
		this.title = title;
		this.gen = 0;
		this.loaded = false;
		this.controls = el('form', { class: 'controls', 'aria-label': `${title}: parameters`, novalidate: true });
		this.controls.addEventListener('submit', (e) => { e.preventDefault(); this.refresh(); });
		this.error = el('div', { class: 'error', role: 'alert', hidden: true });
		this.figures = el('div', { class: 'figures' });
		this.caption = el('p', { class: 'caption' });
		this.snip = snippetBox('Reproduce this figure');
		this.output = el('div', { class: 'output' }, this.error, this.figures, this.caption, this.snip.root);
		this.root.append(this.controls, this.output);
	}

	/* A figure box: {wrap, readout}; kind 'heat' | 'line'. */
	figureBox(kind, label, cls = '') {
		const wrap = el('div', { class: `figwrap ${kind} ${cls}` });
		const readout = el('p', { class: 'readout', 'aria-live': 'polite' });
		const box = el('figure', { class: `fig ${cls}` }, wrap, readout);
		this.figures.append(box);
		const fig = kind === 'heat' ? new Heatmap(wrap, { label, readout }) : new LineChart(wrap, { label, readout });
		readout.textContent = 'Hover, or focus the figure and use the arrow keys, to read exact values.';
		return { box, wrap, readout, fig };
	}

	/* The last row of the controls: a "Draw" button (edits also redraw by themselves). */
	submitRow() {
		return el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'primary', text: 'Draw' }),
			el('span', { class: 'status', role: 'status' }));
	}

	schedule(delay = 300) {
		clearTimeout(this.timer);
		this.timer = setTimeout(() => this.refresh(), delay);
	}

	show() {
		if (!this.loaded) { this.loaded = true; this.refresh(); }
	}

	setStatus(text) {
		const s = this.controls.querySelector('.status');
		if (s) s.textContent = text;
	}

	async refresh() {
		clearTimeout(this.timer);
		const gen = ++this.gen;
		this.root.dataset.state = 'loading';
		this.setStatus('Loading…');
		try {
			const all = this.requests();
			const results = await Promise.all(all.map((q) => (q.json ? getJson(q.url) : fetchTensor(q.url))));
			if (gen !== this.gen) return;
			const requests = all.filter((q) => !q.json);
			this.present(results.filter((_, k) => !all[k].json), requests, results.filter((_, k) => all[k].json));
			this.snip.set(curlText(requests), pythonText(requests, this.combine ? this.combine(requests) : []));
			settleReady(this, requests.map((q) => q.url).join(' '));
			this.setStatus('');
		} catch (e) {
			if (gen !== this.gen) return;
			settleError(this, e, this.form);
			this.setStatus('');
		}
	}
}
