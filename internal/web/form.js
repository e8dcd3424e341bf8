/**
 * A form for a tool's input, built from its JSON Schema, for the playground
 * (GET /playground) and for an approval card's "Approve with changes"
 * (card.js), which starts it from the input the call would send. Served by
 * toolgate at `GET /form.js`; no dependencies.
 *
 * ```js
 * import { buildForm } from "./form.js";
 * const form = buildForm(tool.input_schema, { document });
 * someFormElement.append(form.element);
 * const input = form.read(); // throws an Error naming the field it cannot read
 * ```
 *
 * Every field is labelled by its property name. What read() returns is what
 * the person typed and nothing else: an empty optional field is left out, an
 * untouched optional checkbox is left out, and the only value filled in for
 * them is an enum's selected option (its default, or its first value when the
 * property is required). The gateway validates the input against the schema;
 * the form only keeps a person from sending what the browser can already
 * tell is wrong (required, minlength, maxlength, pattern, min, max, step).
 *
 * Schemas come from the gateway and are treated as untrusted text: names,
 * titles and descriptions go into the page as text nodes only.
 *
 * The module has two halves: plan(), valueOf() and prefill() are pure
 * (tested in Node, form.test.mjs); buildForm() turns a plan into DOM and
 * reads it back.
 * @module toolgate/form
 */

/**
 * Objects nested deeper than this are one raw-JSON field: a schema is the
 * gateway's, but a page need not build a thousand fieldsets because one is
 * deep.
 */
export const MAX_DEPTH = 8;

// format → <input type>. Only formats whose browser value is already the
// JSON Schema format's text; "time" and "uri-reference" are not (a browser
// time has no offset; type=url refuses a relative reference).
const INPUT_TYPES = new Map([
  ["email", "email"],
  ["uri", "url"],
  ["url", "url"],
  ["iri", "url"],
  ["date", "date"],
  ["date-time", "datetime-local"],
]);

const SCALARS = new Set(["string", "number", "integer", "boolean"]);

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * A field of the form, as plan() describes it.
 * @typedef {object} Field
 * @property {"object"|"text"|"number"|"checkbox"|"select"|"list"|"json"} kind
 * @property {string} name the property's name (the label)
 * @property {string[]} path names from the input's root, for error messages
 * @property {boolean} required whether the property is in its object's "required"
 * @property {boolean} enforce whether the input must have it: required, and
 *   every object around it required too. Such a field is always sent and the
 *   browser insists on it; any other is sent only when filled in, so an optional
 *   object nobody filled in is left out whole, its required fields with it
 * @property {string} [inputType] for text and number fields
 * @property {Object<string, string>} [attrs] HTML attributes the schema maps to
 * @property {{label: string, value: *}[]} [options] for select fields; a value
 *   of undefined is the "not set" option
 * @property {number} [selected] the option selected at first
 * @property {boolean} [checked] a checkbox's first state
 * @property {string} [itemType] a list's item type
 * @property {string} [hint] the schema's title and description, as text
 * @property {Field[]} [children] an object's fields
 */

/**
 * plan describes the form for a tool's input schema: an object field with
 * one child per property, or, for any other schema, one raw-JSON field named
 * "input".
 * @param {*} schema
 * @returns {Field}
 */
export function plan(schema) {
  if (isObject(schema) && isObject(schema.properties) && !hasAlternatives(schema)) {
    return objectField("input", [], schema, true, true, 0);
  }
  return { kind: "json", name: "input", path: ["input"], required: true, enforce: false, hint: hintOf(schema) };
}

function hasAlternatives(schema) {
  return ["oneOf", "anyOf", "allOf", "$ref", "if", "not"].some((k) => k in schema);
}

function objectField(name, path, schema, required, enforce, depth) {
  const req = new Set(Array.isArray(schema.required) ? schema.required : []);
  const children = Object.entries(schema.properties).map(([n, s]) =>
    field(n, [...path, n], s, req.has(n), enforce && req.has(n), depth + 1));
  return { kind: "object", name, path, required, enforce, hint: hintOf(schema), children };
}

function field(name, path, schema, required, enforce, depth) {
  const base = { name, path, required, enforce, hint: hintOf(schema) };
  const json = { ...base, kind: "json" };
  if (!isObject(schema) || hasAlternatives(schema)) return json;
  if ("enum" in schema) return selectField(base, schema) ?? json;
  switch (schema.type) {
    case "object":
      if (!isObject(schema.properties) || depth >= MAX_DEPTH) return json;
      return objectField(name, path, schema, required, enforce, depth);
    case "string": {
      const attrs = {};
      if (Number.isInteger(schema.minLength)) attrs.minlength = String(schema.minLength);
      if (Number.isInteger(schema.maxLength)) attrs.maxlength = String(schema.maxLength);
      const pattern = htmlPattern(schema.pattern);
      if (pattern !== undefined) attrs.pattern = pattern;
      const inputType = INPUT_TYPES.get(schema.format) ?? "text";
      if (inputType === "datetime-local") attrs.step = "1"; // seconds, as RFC 3339 has them
      return { ...base, kind: "text", inputType, attrs };
    }
    case "number":
    case "integer": {
      const attrs = { step: schema.type === "integer" ? "1" : "any" };
      if (typeof schema.minimum === "number") attrs.min = String(schema.minimum);
      if (typeof schema.maximum === "number") attrs.max = String(schema.maximum);
      return { ...base, kind: "number", inputType: schema.type, attrs };
    }
    case "boolean":
      return { ...base, kind: "checkbox", checked: schema.default === true };
    case "array": {
      const items = schema.items;
      if (!isObject(items) || hasAlternatives(items) || "enum" in items || !SCALARS.has(items.type)) return json;
      return { ...base, kind: "list", itemType: items.type };
    }
  }
  return json;
}

function selectField(base, schema) {
  if (!Array.isArray(schema.enum) || schema.enum.length === 0) return undefined;
  const options = schema.enum.map((v) => ({ label: typeof v === "string" ? v : JSON.stringify(v), value: v }));
  // An enum that may be left out has a first option "not set".
  if (!base.enforce) options.unshift({ label: "", value: undefined });
  const def = "default" in schema ? JSON.stringify(schema.default) : undefined;
  let selected = options.findIndex((o) => o.value !== undefined && JSON.stringify(o.value) === def);
  if (selected < 0) selected = 0;
  return { ...base, kind: "select", options, selected };
}

/**
 * htmlPattern maps a JSON Schema pattern to an HTML pattern attribute, or
 * undefined when it does not map. A schema pattern matches anywhere in the
 * string, an HTML pattern only the whole value, so only a pattern anchored at
 * both ends means the same in both. A browser compiles the attribute with
 * the "v" flag, stricter than a schema's pattern: Zod's email pattern has
 * an unescaped "-" in a class, which "v" refuses (and Chromium logs an error
 * for). Such a pattern is left to the gateway, which checks it either way.
 * @param {*} p
 * @returns {string|undefined}
 */
export function htmlPattern(p) {
  if (typeof p !== "string" || !p.startsWith("^") || !p.endsWith("$")) return undefined;
  // "\$" is a literal dollar, not an anchor; count the backslashes before it.
  let slashes = 0;
  for (let i = p.length - 2; i >= 0 && p[i] === "\\"; i--) slashes++;
  if (slashes % 2 !== 0) return undefined;
  try {
    new RegExp(`^(?:${p})$`, "v");
  } catch {
    return undefined;
  }
  return p;
}

function hintOf(schema) {
  if (!isObject(schema)) return undefined;
  const parts = [schema.title, schema.description].filter((s) => typeof s === "string" && s !== "");
  return parts.length > 0 ? parts.join(": ") : undefined;
}

/**
 * The raw state of one control, as buildForm reads it: a text, number,
 * list or JSON field's text; a select's option index; a checkbox's state and
 * whether the person changed it.
 * @typedef {string|number|{checked: boolean, dirty: boolean}} Raw
 */

/**
 * valueOf turns a field's raw state into its JSON value, or undefined when
 * the field is left out of the input. It throws an Error naming the field
 * when the text cannot be read.
 * @param {Field} f
 * @param {(f: Field) => Raw} rawOf
 * @returns {*}
 */
export function valueOf(f, rawOf) {
  switch (f.kind) {
    case "object": {
      const out = {};
      for (const c of f.children) {
        const v = valueOf(c, rawOf);
        // defineProperty, not out[name] = v: a property named "__proto__"
        // is a key like any other, not the object's prototype.
        if (v !== undefined) Object.defineProperty(out, c.name, { value: v, enumerable: true, writable: true, configurable: true });
      }
      // An optional object nobody filled in is left out (the root is enforced).
      return Object.keys(out).length === 0 && !f.enforce ? undefined : out;
    }
    case "checkbox": {
      const { checked, dirty } = rawOf(f);
      return dirty || f.enforce ? checked : undefined;
    }
    case "select":
      return f.options[Number(rawOf(f))]?.value;
  }
  const text = rawOf(f);
  if (f.kind === "text") {
    if (text === "") return f.enforce ? "" : undefined;
    return f.inputType === "datetime-local" ? rfc3339(text, new Date(text).getTimezoneOffset()) : text;
  }
  if (text.trim() === "") return f.kind === "list" && f.enforce ? [] : undefined;
  switch (f.kind) {
    case "number":
      return number(f, f.inputType, text.trim());
    case "list":
      // Comma separated; blanks between commas are nothing typed.
      return text.split(",").map((s) => s.trim()).filter((s) => s !== "").map((s) => item(f, s));
    case "json":
      try {
        return JSON.parse(text);
      } catch (e) {
        throw new Error(`${label(f)}: not valid JSON (${e.message})`);
      }
  }
  throw new Error(`${label(f)}: unknown field kind ${f.kind}`);
}

function label(f) {
  return f.path.join(".");
}

function number(f, type, s) {
  const n = Number(s);
  if (!Number.isFinite(n)) throw new Error(`${label(f)}: ${JSON.stringify(s)} is not a number`);
  if (type === "integer" && !Number.isInteger(n)) throw new Error(`${label(f)}: ${JSON.stringify(s)} is not an integer`);
  return n;
}

function item(f, s) {
  switch (f.itemType) {
    case "number":
    case "integer":
      return number(f, f.itemType, s);
    case "boolean":
      if (s === "true" || s === "false") return s === "true";
      throw new Error(`${label(f)}: ${JSON.stringify(s)} is not true or false`);
  }
  return s;
}

/**
 * rfc3339 turns a datetime-local value ("2025-01-31T09:30" or with seconds)
 * into an RFC 3339 date-time, which JSON Schema's "date-time" is, with the
 * browser's UTC offset at that time (what the person meant by a wall-clock
 * time), given in minutes as Date.getTimezoneOffset gives it (UTC minus local).
 * @param {string} local
 * @param {number} offsetMinutes
 * @returns {string}
 */
export function rfc3339(local, offsetMinutes) {
  const withSeconds = /T\d\d:\d\d$/.test(local) ? `${local}:00` : local;
  if (!Number.isFinite(offsetMinutes)) return withSeconds; // not a time the browser could read: the gateway says so
  if (offsetMinutes === 0) return `${withSeconds}Z`;
  const east = -offsetMinutes;
  const abs = Math.abs(east);
  const hh = String(Math.floor(abs / 60)).padStart(2, "0");
  const mm = String(abs % 60).padStart(2, "0");
  return `${withSeconds}${east < 0 ? "-" : "+"}${hh}:${mm}`;
}

/**
 * prefill is the raw state of every field that reads back (valueOf) as
 * value, or null when the fields cannot hold value exactly: a property the
 * schema does not name, a value of another type than its field, text a
 * control would change (a line break in a one-line field, a comma in a list
 * item), or a value valueOf would leave out or fill in (an empty optional
 * string, a required one missing). A value that does not fit is better shown
 * as JSON than changed on its way through the form.
 * @param {Field} root
 * @param {*} value
 * @returns {Map<Field, Raw>|null}
 */
export function prefill(root, value) {
  const raws = new Map();
  if (!fill(root, value, raws)) return null;
  let back;
  try {
    back = valueOf(root, (f) => raws.get(f));
  } catch {
    return null;
  }
  return same(back, value) ? raws : null;
}

/** fill sets the raw state of f and its children for v; false when v cannot be one. */
function fill(f, v, raws) {
  const absent = v === undefined;
  switch (f.kind) {
    case "object":
      if (!absent && (!isObject(v) || Object.keys(v).some((k) => !f.children.some((c) => c.name === k)))) return false;
      return f.children.every((c) => fill(c, absent || !Object.hasOwn(v, c.name) ? undefined : v[c.name], raws));
    case "checkbox":
      if (!absent && typeof v !== "boolean") return false;
      raws.set(f, absent ? { checked: f.checked, dirty: false } : { checked: v, dirty: true });
      return true;
    case "select": {
      const i = absent ? f.options.findIndex((o) => o.value === undefined) : f.options.findIndex((o) => o.value !== undefined && same(o.value, v));
      if (i < 0) return false;
      raws.set(f, i);
      return true;
    }
    case "json":
      raws.set(f, absent ? "" : JSON.stringify(v, null, 2));
      return true;
  }
  if (absent) {
    raws.set(f, "");
    return true;
  }
  let raw;
  switch (f.kind) {
    case "text":
      raw = typeof v === "string" && browserKeeps(f.inputType, v) ? v : undefined;
      if (raw !== undefined && f.inputType === "datetime-local") raw = localDateTime(v);
      break;
    case "number":
      raw = typeof v === "number" && Number.isFinite(v) ? String(v) : undefined;
      break;
    case "list":
      raw = Array.isArray(v) && v.every((x) => typeof x === f.itemType || (f.itemType === "integer" && Number.isInteger(x)))
        && v.every((x) => typeof x !== "string" || (x !== "" && x === x.trim() && !x.includes(",") && !/[\r\n]/.test(x)))
        ? v.map(String).join(", ")
        : undefined;
      break;
  }
  if (raw === undefined) return false;
  raws.set(f, raw);
  return true;
}

/**
 * browserKeeps reports whether an <input> of type given its value as v
 * reads it back unchanged: every one-line input drops line breaks, email
 * and url ones trim, a date one empties anything but a date.
 */
function browserKeeps(type, v) {
  if (/[\r\n]/.test(v)) return false;
  switch (type) {
    case "email":
    case "url":
      return v === v.trim();
    case "date":
      return /^\d{4}-\d{2}-\d{2}$/.test(v);
    case "datetime-local":
      return localDateTime(v) !== "";
  }
  return true;
}

/**
 * localDateTime is an RFC 3339 date-time as a datetime-local value (the
 * browser's wall-clock time, with seconds), or "" when it is none.
 */
function localDateTime(v) {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i.test(v)) return "";
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) return "";
  const p = (n) => String(n).padStart(2, "0");
  return `${String(d.getFullYear()).padStart(4, "0")}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** same reports whether two JSON values are equal, whatever the order of their keys. */
function same(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && same(a[k], b[k]));
}

/**
 * buildForm builds the fields for a tool's input schema.
 * @param {*} schema the tool's input_schema, as GET /tools gives it
 * @param {{document: Document, idPrefix?: string, value?: *}} options
 *   idPrefix keeps the ids of two forms on one page apart; value is an
 *   input to start from (an approval's, to change), which fills the fields
 *   when they can hold it exactly (prefill) and is otherwise one JSON field
 * @returns {{element: HTMLElement, read: () => *, fitted: boolean}} the
 *   fields (no <form> around them, so the page chooses its own); read(),
 *   which returns the input or throws an Error naming a field it cannot
 *   read; and whether the fields are the schema's (false: value did not fit
 *   them and is one JSON field)
 */
export function buildForm(schema, { document, idPrefix = "tg-field", value }) {
  let root = plan(schema);
  let raws = null;
  let fitted = true;
  if (value !== undefined) {
    raws = prefill(root, value);
    if (!raws) {
      fitted = false;
      root = plan(undefined);
      raws = prefill(root, value);
    }
  }
  const controls = new Map(); // Field → its control
  let n = 0;
  const nextId = () => `${idPrefix}-${++n}`;

  const el = (tag, props = {}, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) e.setAttribute(k, v);
    e.append(...children); // strings become text nodes, never markup
    return e;
  };

  function build(f) {
    if (f.kind === "object") {
      const box = f.path.length === 0 ? el("div", { class: "fields" }) : el("fieldset", {}, el("legend", {}, f.name));
      if (f.path.length > 0 && f.hint) box.append(el("p", { class: "hint" }, f.hint));
      for (const c of f.children) box.append(build(c));
      return box;
    }
    const id = nextId();
    let control;
    switch (f.kind) {
      case "text":
      case "number":
        control = el("input", { id, type: f.kind === "number" ? "number" : f.inputType, ...f.attrs });
        break;
      case "checkbox":
        control = el("input", { id, type: "checkbox" });
        control.checked = f.checked;
        control.dataset.dirty = "";
        control.addEventListener("change", () => (control.dataset.dirty = "1"));
        break;
      case "select":
        control = el("select", { id });
        f.options.forEach((o, i) => control.append(el("option", { value: String(i) }, o.value === undefined ? "(not set)" : o.label)));
        control.selectedIndex = f.selected;
        break;
      case "list":
        control = el("input", { id, type: "text", placeholder: `comma separated ${f.itemType}s` });
        break;
      default:
        control = el("textarea", { id, rows: "3", placeholder: "JSON", spellcheck: "false" });
    }
    if (f.enforce && f.kind !== "checkbox" && f.kind !== "select") control.required = true;
    controls.set(f, control);
    const row = el("div", { class: `field ${f.kind}` }, el("label", { for: id }, f.name), control);
    if (f.required) row.append(el("span", { class: "required", "aria-hidden": "true" }, "required"));
    if (f.hint) {
      const hint = el("p", { class: "hint", id: `${id}-hint` }, f.hint);
      control.setAttribute("aria-describedby", hint.id);
      row.append(hint);
    }
    return row;
  }

  const element = build(root);
  const rawOf = (f) => {
    const c = controls.get(f);
    switch (f.kind) {
      case "checkbox":
        return { checked: c.checked, dirty: c.dataset.dirty === "1" };
      case "select":
        return c.selectedIndex;
    }
    return c.value;
  };
  for (const [f, raw] of raws ?? []) {
    const c = controls.get(f);
    if (f.kind === "checkbox") {
      c.checked = raw.checked;
      c.dataset.dirty = raw.dirty ? "1" : "";
    } else if (f.kind === "select") {
      c.selectedIndex = raw;
    } else {
      c.value = raw;
    }
  }
  return { element, read: () => valueOf(root, rawOf), fitted };
}
