// The wrench palette: the session's tools, a form generated from each tool's JSON Schema, and
// running one as the user (POST …/tools/{name}/invoke). The call and its result land on the
// log as actor "user" events; a 409 means an agent turn holds the lock and nothing happened.

import { ApiError, api, sessionPath } from "./api.js";
import { clock, fill, h } from "./dom.js";

let serial = 0;

function typeOf(schema) {
  const type = schema.type;
  if (Array.isArray(type)) return type.find((t) => t !== "null") || "string";
  if (type) return type;
  if (schema.properties) return "object";
  return "json";
}

function isLong(name, schema) {
  return (
    schema.format === "textarea" ||
    (schema.maxLength || 0) > 200 ||
    /^(content|text|body|prompt|code|script|patch)$/i.test(name)
  );
}

/**
 * One form field for `schema`; returns {el, read}. `read()` gives the value, `undefined` to
 * leave the property out, or throws an Error naming the field.
 */
function field(name, schema, required, path) {
  const id = `tool-field-${++serial}`;
  const label = h("label", { for: id }, name, required ? h("span", { class: "required", title: "required" }, " *") : null);
  const hint = schema.description ? h("small", { class: "muted" }, schema.description) : null;
  const type = typeOf(schema);

  if (Array.isArray(schema.enum)) {
    const select = h(
      "select",
      { id, name: path },
      required ? null : h("option", { value: "" }, "—"),
      schema.enum.map((value, i) => h("option", { value: String(i), selected: schema.default === value }, typeof value === "string" ? value : JSON.stringify(value))),
    );
    return {
      el: h("div", { class: "field" }, label, select, hint),
      read: () => (select.value === "" ? undefined : schema.enum[Number(select.value)]),
    };
  }
  if (type === "boolean") {
    const box = h("input", { id, name: path, type: "checkbox", checked: schema.default === true });
    return {
      el: h("div", { class: "field field--check" }, box, label, hint),
      read: () => box.checked,
    };
  }
  if (type === "integer" || type === "number") {
    const input = h("input", {
      id,
      name: path,
      type: "number",
      step: type === "integer" ? "1" : "any",
      min: schema.minimum,
      max: schema.maximum,
      value: schema.default,
      required,
    });
    return {
      el: h("div", { class: "field" }, label, input, hint),
      read: () => {
        if (input.value === "") return undefined;
        const value = Number(input.value);
        if (!Number.isFinite(value) || (type === "integer" && !Number.isInteger(value))) {
          throw new Error(`${path}: expected ${type === "integer" ? "a whole number" : "a number"}`);
        }
        return value;
      },
    };
  }
  if (type === "object") {
    const props = schema.properties || {};
    const needed = new Set(schema.required || []);
    /** @type {Array<[string, {el: HTMLElement, read: () => any}]>} */
    const children = Object.entries(props).map(([key, sub]) => [key, field(key, sub, needed.has(key), path ? `${path}.${key}` : key)]);
    const fieldset = h(
      "fieldset",
      { class: "field field--object" },
      path ? h("legend", null, name, required ? " *" : "") : null,
      hint,
      children.map(([, c]) => c.el),
      children.length ? null : h("p", { class: "muted small" }, "This tool takes no input."),
    );
    return {
      el: fieldset,
      read: () => {
        const out = {};
        for (const [key, child] of children) {
          const value = child.read();
          if (value !== undefined) out[key] = value;
        }
        return path && !required && Object.keys(out).length === 0 ? undefined : out;
      },
    };
  }
  if (type === "string") {
    const attrs = { id, name: path, required, minlength: schema.minLength, maxlength: schema.maxLength, spellcheck: "false" };
    const input = isLong(name, schema)
      ? h("textarea", { ...attrs, rows: 6 }, schema.default ?? "")
      : h("input", { ...attrs, type: "text", value: schema.default, autocomplete: "off" });
    return {
      el: h("div", { class: "field" }, label, input, hint),
      read: () => (input.value === "" && !required ? undefined : input.value),
    };
  }
  // arrays and anything else: JSON typed by hand
  const area = h("textarea", { id, name: path, rows: 3, class: "json", placeholder: type === "array" ? "[ … ] as JSON" : "JSON", spellcheck: "false" });
  return {
    el: h("div", { class: "field" }, label, area, hint || h("small", { class: "muted" }, "JSON")),
    read: () => {
      if (area.value.trim() === "") return undefined;
      try {
        return JSON.parse(area.value);
      } catch {
        throw new Error(`${path}: not valid JSON`);
      }
    },
  };
}

function conflictText(error) {
  const p = error.problem || {};
  const until = p.expires_at ? ` until ${clock(p.expires_at)}` : "";
  return `The agent is in the middle of a turn (${p.turn_id || "turn"}${until}). Your tool was not run and nothing was added to the log. Try again when the turn ends.`;
}

function toolForm(tool, ctx, dialog) {
  const root = field(tool.name, tool.input_schema || { type: "object" }, true, "");
  const outcome = h("div", { class: "outcome", role: "status", "aria-live": "polite" });
  const run = h("button", { type: "submit", class: "primary" }, `Run ${tool.name}`);
  const form = h(
    "form",
    {
      class: "tool-form",
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        let input;
        try {
          input = root.read() || {};
        } catch (error) {
          fill(outcome, h("p", { class: "error-text", role: "alert" }, error.message));
          return;
        }
        run.disabled = true;
        fill(outcome, h("p", { class: "muted" }, "Running…"));
        try {
          const result = await api(sessionPath(ctx.session.id, `/tools/${encodeURIComponent(tool.name)}/invoke`), { method: "POST", body: input });
          fill(outcome, h("p", null, `Ran ${tool.name}: call seq ${result.call_seq}, result seq ${result.result_seq}${result.error ? ` — error: ${result.error}` : " — ok"}`));
          dialog.close();
          await ctx.onRan(result);
        } catch (error) {
          let text = error.message;
          let cls = "error-text";
          if (error instanceof ApiError && error.status === 409) {
            text = conflictText(error);
            cls = "conflict";
          } else if (error instanceof ApiError && error.status === 403) {
            text = `This token may not run tools: ${error.message}`;
          }
          fill(outcome, h("p", { class: cls, role: "alert" }, text));
        } finally {
          run.disabled = false;
        }
      },
    },
    h("h3", null, tool.name),
    tool.description ? h("p", { class: "muted small" }, tool.description) : null,
    root.el,
    h("div", { class: "form-actions" }, run),
    outcome,
  );
  return form;
}

/** Open the palette for ctx.session; ctx.onRan(result) runs after a successful invocation. */
export async function openPalette(dialog, ctx) {
  const list = dialog.querySelector("#palette-tools");
  const formBox = dialog.querySelector("#palette-form");
  fill(list, h("li", { class: "muted small" }, "Loading tools…"));
  formBox.replaceChildren();
  if (!dialog.open) dialog.showModal();
  let tools;
  try {
    tools = await api(sessionPath(ctx.session.id, "/tools"));
  } catch (error) {
    fill(list, h("li", { class: "error-text" }, `Could not list tools: ${error.message}`));
    return;
  }
  if (!tools.length) {
    fill(list, h("li", { class: "muted small" }, "This server offers no tools."));
    return;
  }
  const choose = (tool, button) => {
    for (const b of list.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
    fill(formBox, toolForm(tool, ctx, dialog));
    const first = formBox.querySelector("input, textarea, select, button");
    if (first) first.focus();
  };
  fill(
    list,
    tools.map((tool) => {
      const button = h("button", { type: "button", class: "tool-choice", "aria-pressed": "false", title: tool.description, dataset: { tool: tool.name } }, tool.name);
      button.addEventListener("click", () => choose(tool, button));
      return h("li", null, button);
    }),
  );
  choose(tools[0], list.querySelector("button"));
}
