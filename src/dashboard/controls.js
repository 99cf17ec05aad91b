/* posenc dashboard: parameter forms built from the catalogue (GET /v1).
 *
 * Each catalogue parameter {name, type, required, default, minimum, maximum, choices, help}
 * becomes one labelled control: a number input (integer / number), a select (enum), a checkbox
 * (boolean) or a text input (comma lists). A table that appears in the catalogue therefore gets
 * its controls without any change here. Required parameters start from a readable size
 * (STARTERS); optional ones start empty, showing their default as placeholder, and are left out
 * of the URL while empty or equal to the default, so the URLs (and the snippets) stay short.
 * A parameter whose help names the choices of another enum it belongs to ("yarn: ...",
 * "(dynamic, yarn, longrope, llama3)", "t2t: ...") is shown only while that enum has one of
 * them, and left out of the URL while hidden, so the form stays short enough for a 1280x800
 * screen and never sends a parameter the chosen variant refuses. */

/* Starting values of required parameters: small enough to draw at once, big enough to see. */
const STARTERS = { len: 128, dim: 128, height: 14, width: 14, heads: 8, q_len: 48, frames: 4, timesteps: '0,1,2,4,8,16,32,64,125,250,500,999' };

let uid = 0;

function starterOf(p) {
	if (p.default !== undefined) return p.default;
	if (p.required && p.type === 'enum' && p.choices && p.choices.length) return p.choices[0];
	if (STARTERS[p.name] !== undefined) {
		let v = STARTERS[p.name];
		if (typeof v === 'string') return v; /* a list */
		if (p.minimum !== undefined) v = Math.max(v, p.minimum);
		if (p.maximum !== undefined) v = Math.min(v, p.maximum);
		return String(v);
	}
	return p.minimum !== undefined ? String(Math.max(p.minimum, 1)) : '';
}

/* {owner, values} when p's help says which choices of another enum parameter it applies to. */
function appliesTo(p, params) {
	if (p.required) return null;
	const help = p.help || '';
	const m = help.match(/^([a-z0-9_]+(?:, ?[a-z0-9_]+)*):/i) || help.match(/\(([a-z0-9_]+(?:, ?[a-z0-9_]+)*)\)\s*$/i);
	if (!m) return null;
	const values = m[1].split(/, ?/);
	const owner = params.find((q) => q !== p && q.type === 'enum' && values.every((v) => (q.choices || []).includes(v)));
	return owner ? { owner: owner.name, values } : null;
}

/* Plain numbers for min/max attributes: the catalogue gives reals such as 1e-300 and 4.5e15. */
function attrNumber(x) {
	return Number.isFinite(x) ? String(x) : '';
}

function el(tag, props = {}, ...children) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(props)) {
		if (k === 'class') e.className = v;
		else if (k === 'text') e.textContent = v;
		else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
	}
	for (const c of children) if (c) e.append(c);
	return e;
}
export { el };

/* One control for catalogue parameter p: {row, input, get(), set(v), param}. */
function makeControl(p, initial) {
	const id = `pe-${p.name}-${++uid}`;
	const helpId = `${id}-help`;
	const label = el('label', { for: id, text: p.name.replace(/_/g, ' ') });
	const help = el('small', { id: helpId, class: 'help', text: p.help || '' });
	let input, get, set;
	if (p.type === 'enum') {
		input = el('select', { id, name: p.name, 'aria-describedby': helpId });
		if (!p.required && p.default === undefined)
			input.append(el('option', { value: '', text: '(default)' }));
		for (const c of p.choices || []) input.append(el('option', { value: c, text: c }));
		get = () => input.value;
		set = (v) => { input.value = v; };
	} else if (p.type === 'boolean') {
		input = el('input', { id, name: p.name, type: 'checkbox', 'aria-describedby': helpId });
		get = () => (input.checked ? '1' : '0');
		set = (v) => { input.checked = v === '1' || v === 'true' || v === 1 || v === true; };
	} else if (p.type === 'integer' || p.type === 'number') {
		input = el('input', {
			id, name: p.name, type: 'number', inputmode: p.type === 'integer' ? 'numeric' : 'decimal',
			step: p.type === 'integer' ? '1' : 'any', min: attrNumber(p.minimum), max: attrNumber(p.maximum),
			placeholder: p.default !== undefined ? p.default : 'auto', 'aria-describedby': helpId,
			required: p.required || undefined,
		});
		get = () => input.value.trim();
		set = (v) => { input.value = v; };
	} else {
		input = el('input', {
			id, name: p.name, type: 'text', spellcheck: 'false',
			placeholder: p.type === 'list' ? 'comma list' : (p.default || ''), 'aria-describedby': helpId,
		});
		get = () => input.value.trim().replace(/\s+/g, '');
		set = (v) => { input.value = v; };
	}
	set(initial !== undefined ? initial : (p.type === 'boolean' || p.type === 'enum' || p.required ? starterOf(p) : ''));
	const row = el('div', { class: `field field-${p.type}` }, ...(p.type === 'boolean' ? [input, label] : [label, input]), help);
	return { row, input, get, set, param: p };
}

/* A form for a catalogue entry inside container (which is emptied).
 * options: initial {name: value}, exclude [names], onChange(name) called on every edit. */
export function buildForm(container, entry, options = {}) {
	const { initial = {}, exclude = [], onChange = () => {} } = options;
	container.replaceChildren();
	const controls = [];
	const fields = el('div', { class: 'fields' });
	const params = entry.params || [];
	for (const p of params) {
		if (exclude.includes(p.name)) continue;
		const c = makeControl(p, initial[p.name]);
		c.applies = appliesTo(p, params);
		fields.append(c.row);
		c.input.addEventListener(c.input.tagName === 'SELECT' || c.input.type === 'checkbox' ? 'change' : 'input', () => {
			c.input.removeAttribute('aria-invalid');
			if (p.type === 'enum') showRelevant();
			onChange(c.param.name);
		});
		controls.push(c);
	}
	/* Show each conditional parameter while its owner enum has one of its values. */
	function showRelevant() {
		for (const c of controls) {
			if (!c.applies) continue;
			const owner = controls.find((x) => x.param.name === c.applies.owner);
			const v = owner ? owner.get() || owner.param.default : undefined;
			c.row.hidden = !c.applies.values.includes(v);
		}
	}
	showRelevant();
	container.append(fields);
	return {
		entry,
		controls,
		/* [name, value] pairs for the URL: required ones always, optional ones when set and not
		 * the default. */
		pairs() {
			const out = [];
			for (const c of controls) {
				const v = c.get(), p = c.param;
				if (v === '' || c.row.hidden) continue;
				if (!p.required && p.default !== undefined && String(v) === String(p.default)) continue;
				out.push([p.name, v]);
			}
			return out;
		},
		value(name) {
			const c = controls.find((x) => x.param.name === name);
			if (!c) return undefined;
			const v = c.get();
			return v === '' && c.param.default !== undefined ? c.param.default : v;
		},
		set(name, v) {
			const c = controls.find((x) => x.param.name === name);
			if (c) c.set(v);
		},
		input(name) {
			const c = controls.find((x) => x.param.name === name);
			return c ? c.input : null;
		},
		/* Mark the control the API named in a problem's "param" (opening "More" if needed). */
		markInvalid(name) {
			for (const c of controls) c.input.removeAttribute('aria-invalid');
			const c = controls.find((x) => x.param.name === name);
			if (!c) return false;
			c.input.setAttribute('aria-invalid', 'true');
			c.row.hidden = false;
			return true;
		},
	};
}
