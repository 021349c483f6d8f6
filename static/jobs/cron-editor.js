// The cron editor: one row per field (second … day-of-week) with a mode
// (every / range / step / specific, plus the special day forms) kept in
// sync both ways with the raw expression input, which stays the source of
// truth: the server validates and previews only what is in that input.
(function () {
  "use strict";

  // Strings come from Django's JavaScript catalog (/jsi18n/, loaded first);
  // without it the editor speaks English.
  const gettext = window.gettext || function (text) { return text; };
  const interpolate = window.interpolate || function (format, args) {
    return format.replace(/%s/g, function () { return String(args.shift()); });
  };

  const FIELDS = [
    { key: "second", label: gettext("Second"), min: 0, max: 59 },
    { key: "minute", label: gettext("Minute"), min: 0, max: 59 },
    { key: "hour", label: gettext("Hour"), min: 0, max: 23 },
    { key: "dom", label: gettext("Day of month"), min: 1, max: 31 },
    { key: "month", label: gettext("Month"), min: 1, max: 12, hint: gettext("1-12 or JAN-DEC") },
    {
      key: "dow",
      label: gettext("Day of week"),
      min: 0,
      max: 7,
      hint: gettext("0 or 7 = Sunday, 1 = Monday … 6 = Saturday, or SUN-SAT. Not Quartz's numbering (1 = Sunday there): Quartz's 1L is SUNL here."),
    },
  ];

  // The aliases and the day-of-week names are jobs/cron.py's, which the page
  // renders as JSON (#cron-names, cron.editor_names): the editor expands
  // what the server accepts, and keeps no copy of its own.
  let cronNames = null;
  function names() {
    if (!cronNames) {
      const data = document.getElementById("cron-names");
      cronNames = data ? JSON.parse(data.textContent) : { aliases: {}, days: [] };
    }
    return cronNames;
  }

  // mode → [label, [[part, label, placeholder], …]]
  const MODES = {
    every: [gettext("Every"), []],
    any: [gettext("No specific value (?)"), []],
    range: [gettext("Range"), [["from", gettext("from"), ""], ["to", gettext("to"), ""]]],
    step: [gettext("Step"), [["start", gettext("starting at"), "*"], ["end", gettext("up to"), gettext("(end)")], ["every", gettext("every"), ""]]],
    specific: [gettext("Specific"), [["values", gettext("values"), gettext("e.g. 1,15,30")]]],
    last: [gettext("Last day of month"), []],
    lastOffset: [gettext("Days before the last"), [["offset", gettext("days before"), ""]]],
    nearest: [gettext("Nearest weekday to"), [["day", gettext("day"), ""]]],
    lastWeekday: [gettext("Last weekday of month"), []],
    nth: [gettext("Nth weekday"), [["day", gettext("weekday"), "0-7"], ["nth", gettext("number"), "1-5"]]],
    lastOf: [gettext("Last given weekday"), [["day", gettext("weekday"), "0-7"]]],
    custom: [gettext("Custom"), [["text", gettext("token"), ""]]],
  };

  const DAY_NAMES = [
    gettext("Sunday"), gettext("Monday"), gettext("Tuesday"), gettext("Wednesday"),
    gettext("Thursday"), gettext("Friday"), gettext("Saturday"), gettext("Sunday"),
  ];

  // A day-of-week value ("1", "mon") → its name, or "" when it is not one.
  function dayName(value) {
    const text = String(value || "").trim().toUpperCase();
    if (/^\d+$/.test(text)) return Number(text) <= 7 ? DAY_NAMES[Number(text)] : "";
    const index = names().days.indexOf(text);
    return index >= 0 ? DAY_NAMES[index] : "";
  }

  function modesFor(field) {
    const modes = ["every"];
    // "?" (no specific value) belongs to the two day fields, as error 47003 says.
    if (field.key === "dom" || field.key === "dow") modes.push("any");
    modes.push("range", "step", "specific");
    if (field.key === "dom") modes.push("last", "lastOffset", "nearest", "lastWeekday");
    if (field.key === "dow") modes.push("nth", "lastOf");
    modes.push("custom");
    return modes;
  }

  const VALUE = "(\\d+|[A-Za-z]{3})";

  // One field's token → {mode, parts}.
  function parseToken(token, field) {
    let m;
    if (token === "?" && (field.key === "dom" || field.key === "dow")) return { mode: "any", parts: {} };
    if (token === "*" || token === "?") return { mode: "every", parts: {} };
    if ((m = token.match(new RegExp("^(\\*|\\?|" + VALUE.slice(1, -1) + ")(?:-" + VALUE + ")?/(\\d+)$")))) {
      return { mode: "step", parts: { start: m[1] === "*" || m[1] === "?" ? "" : m[1], end: m[2] || "", every: m[3] } };
    }
    if (field.key === "dom") {
      if (token.toUpperCase() === "L") return { mode: "last", parts: {} };
      if (token.toUpperCase() === "LW") return { mode: "lastWeekday", parts: {} };
      if ((m = token.match(/^L-(\d+)$/i))) return { mode: "lastOffset", parts: { offset: m[1] } };
      if ((m = token.match(/^(\d+)W$/i))) return { mode: "nearest", parts: { day: m[1] } };
    }
    if (field.key === "dow") {
      if ((m = token.match(new RegExp("^" + VALUE + "#(\\d)$")))) return { mode: "nth", parts: { day: m[1], nth: m[2] } };
      if ((m = token.match(new RegExp("^" + VALUE + "L$", "i")))) return { mode: "lastOf", parts: { day: m[1] } };
    }
    if ((m = token.match(new RegExp("^" + VALUE + "-" + VALUE + "$")))) return { mode: "range", parts: { from: m[1], to: m[2] } };
    if (new RegExp("^" + VALUE + "(," + VALUE + ")*$").test(token)) return { mode: "specific", parts: { values: token } };
    return { mode: "custom", parts: { text: token } };
  }

  // {mode, parts} → the field's token.
  function buildToken(state, field) {
    const p = state.parts;
    const v = function (name, fallback) {
      const value = (p[name] || "").trim();
      return value === "" ? String(fallback) : value;
    };
    switch (state.mode) {
      case "every":
        return "*";
      case "any":
        return "?";
      case "range":
        return v("from", field.min) + "-" + v("to", field.max);
      case "step":
        return (p.start && p.start.trim() ? p.start.trim() : "*") + (p.end && p.end.trim() ? "-" + p.end.trim() : "") + "/" + v("every", 1);
      case "specific":
        return v("values", field.min).replace(/\s+/g, "");
      case "last":
        return "L";
      case "lastOffset":
        return "L-" + v("offset", 1);
      case "nearest":
        return v("day", 1) + "W";
      case "lastWeekday":
        return "LW";
      case "nth":
        return v("day", 1) + "#" + v("nth", 1);
      case "lastOf":
        return v("day", 5) + "L";
      default:
        return v("text", "*").replace(/\s+/g, "");
    }
  }

  // The raw text → six tokens, or null when it is not six fields (yet).
  function splitExpression(text) {
    let value = text.trim();
    const aliases = names().aliases;
    if (Object.prototype.hasOwnProperty.call(aliases, value.toLowerCase())) value = aliases[value.toLowerCase()];
    const tokens = value.split(/\s+/).filter(Boolean);
    if (tokens.length === 5) tokens.unshift("0");
    return tokens.length === 6 ? tokens : null;
  }

  function init(root) {
    const raw = root.querySelector ? root.querySelector("#id_cron_expression") : null;
    const container = root.querySelector ? root.querySelector("#cron-fields") : null;
    if (!raw || !container || container.dataset.ready) return;
    container.dataset.ready = "1";

    const rows = FIELDS.map(function (field) {
      const row = document.createElement("div");
      row.className = "cron-field";
      row.dataset.field = field.key;
      const label = document.createElement("label");
      label.textContent = field.label;
      const select = document.createElement("select");
      select.className = "cron-mode";
      select.dataset.field = field.key;
      select.setAttribute("aria-label", interpolate(gettext("%s mode"), [field.label]));
      modesFor(field).forEach(function (mode) {
        const option = document.createElement("option");
        option.value = mode;
        option.textContent = MODES[mode][0];
        select.append(option);
      });
      label.append(select);
      const parts = document.createElement("span");
      parts.className = "cron-parts";
      const hint = document.createElement("small");
      hint.className = "muted cron-hint";
      hint.id = "cron-hint-" + field.key;
      hint.textContent = field.hint || field.min + "-" + field.max;
      row.append(label, parts, hint);
      container.append(row);
      return { field: field, row: row, select: select, parts: parts, state: { mode: "every", parts: {} } };
    });

    function renderParts(entry) {
      entry.select.value = entry.state.mode;
      entry.parts.replaceChildren();
      MODES[entry.state.mode][1].forEach(function (spec) {
        const label = document.createElement("label");
        label.textContent = spec[1] + " ";
        const input = document.createElement("input");
        input.type = "text";
        input.size = spec[0] === "values" || spec[0] === "text" ? 14 : 4;
        input.dataset.part = spec[0];
        input.dataset.field = entry.field.key;
        input.placeholder = spec[2];
        input.value = entry.state.parts[spec[0]] || "";
        input.setAttribute("aria-label", entry.field.label + " " + spec[1]);
        input.setAttribute("aria-describedby", "cron-hint-" + entry.field.key);
        label.append(input);
        // A weekday typed as a number says which day it is (1 is Monday here).
        if (entry.field.key === "dow" && spec[0] === "day") {
          const echo = document.createElement("output");
          echo.className = "day-name";
          echo.dataset.dayFor = spec[0];
          const show = function () {
            const name = dayName(input.value);
            echo.textContent = name ? "= " + name : "";
          };
          input.addEventListener("input", show);
          show();
          label.append(" ", echo);
        }
        entry.parts.append(label);
      });
    }

    let writing = false;

    // Fields → raw: rebuild the expression and let htmx see an input event.
    function writeRaw() {
      raw.value = rows.map(function (entry) {
        return buildToken(entry.state, entry.field);
      }).join(" ");
      writing = true;
      raw.dispatchEvent(new Event("input", { bubbles: true }));
      writing = false;
    }

    // Raw → fields: re-read every field unless the text is not six fields.
    function readRaw() {
      const tokens = splitExpression(raw.value);
      container.classList.toggle("out-of-sync", tokens === null);
      if (!tokens) return;
      rows.forEach(function (entry, index) {
        const token = tokens[index];
        if (buildToken(entry.state, entry.field) === token) return; // already showing it
        entry.state = parseToken(token, entry.field);
        renderParts(entry);
      });
    }

    rows.forEach(function (entry) {
      entry.select.addEventListener("change", function () {
        const previous = entry.state;
        entry.state = { mode: entry.select.value, parts: {} };
        if (entry.state.mode === "custom") entry.state.parts.text = buildToken(previous, entry.field);
        if (entry.state.mode === "specific") {
          // The field's current value carries over; without one the box asks
          // for a value rather than the expression getting a silent minimum.
          const token = buildToken(previous, entry.field);
          if (new RegExp("^" + VALUE + "(," + VALUE + ")*$").test(token)) entry.state.parts.values = token;
        }
        renderParts(entry);
        if (entry.state.mode === "specific" && !entry.state.parts.values) {
          const box = entry.parts.querySelector("input[data-part=values]");
          box.required = true;
          box.setAttribute("aria-invalid", "true");
          box.placeholder = gettext("type a value");
          box.focus();
          return;
        }
        writeRaw();
      });
      entry.parts.addEventListener("input", function (event) {
        if (event.target.dataset.part === "values") event.target.removeAttribute("aria-invalid");
      });
      entry.parts.addEventListener("input", function (event) {
        const part = event.target.dataset.part;
        if (!part) return;
        entry.state.parts[part] = event.target.value;
        writeRaw();
      });
    });

    raw.addEventListener("input", function () {
      if (!writing) readRaw();
    });

    // A new time zone changes the preview times: ask for it again.
    const zone = document.getElementById("id_timezone");
    if (zone && window.htmx) {
      let timer;
      zone.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(function () {
          window.htmx.trigger(raw, "cron-timezone-changed");
        }, 400);
      });
    }

    rows.forEach(renderParts);
    readRaw();
  }

  window.CronEditor = {
    parseToken: parseToken,
    buildToken: buildToken,
    splitExpression: splitExpression,
    dayName: dayName,
    FIELDS: FIELDS,
  };

  if (window.htmx) {
    window.htmx.onLoad(init);
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      init(document);
    });
  }
})();
