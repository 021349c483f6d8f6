// Cronboard console: small progressive enhancements. Every page works
// without this file; with it, the job form shows only the fields that apply
// (and the chosen handler's help), the property bag gets a key/value editor,
// live parts of pages refresh themselves, ticks in the job list survive its
// redraws, and failed saves put the error summary in front of the reader.
(function () {
  "use strict";

  // Strings come from Django's JavaScript catalog (/jsi18n/, loaded first);
  // without it the console speaks English.
  const gettext = window.gettext || function (text) { return text; };
  const interpolate = window.interpolate || function (format, args) {
    return format.replace(/%s/g, function () { return String(args.shift()); });
  };
  const loadedAt = Date.now();

  // An element shows for each of the space-separated values of its attribute.
  function showMatching(root, attr, value) {
    root.querySelectorAll("[" + attr + "]").forEach(function (el) {
      el.hidden = el.getAttribute(attr).split(" ").indexOf(value) === -1;
    });
  }

  function initToggles(root) {
    const form = root.querySelector ? (root.matches && root.matches("#job-form") ? root : root.querySelector("#job-form")) : null;
    if (!form) return;
    const kind = form.querySelector("[name=kind]");
    const schedule = form.querySelector("[name=schedule_type]");
    const handler = form.querySelector("select[name=handler]");
    const update = function () {
      if (kind) showMatching(form, "data-kind", kind.value);
      if (schedule) showMatching(form, "data-schedule", schedule.value);
      if (handler) showMatching(form, "data-handler-help", handler.value);
    };
    if (kind) kind.addEventListener("change", update);
    if (schedule) schedule.addEventListener("change", update);
    if (handler) handler.addEventListener("change", update);
    update();
    initIntervalCheck(form);
  }

  // The interval box says at once when it is below the floor the server
  // enforces (its min attribute comes from jobs.cron.MIN_INTERVAL_SECONDS).
  function initIntervalCheck(form) {
    const input = form.querySelector("input[name=interval_seconds]");
    if (!input) return;
    const min = Number(input.getAttribute("min") || 0);
    const check = function (event) {
      const field = input.closest(".field");
      // A form the server sent back says its own message: one is enough.
      if (!event && field.querySelector(".error:not(.live-error)")) return;
      let hint = field.querySelector(".live-error");
      const text = input.value.trim();
      let message = "";
      if (text !== "" && !/^-?\d+$/.test(text)) message = gettext("Enter a whole number of seconds.");
      else if (text !== "" && Number(text) < min) message = interpolate(gettext("The interval must be at least %s seconds."), [min]);
      if (!message) {
        if (hint) hint.remove();
        input.removeAttribute("aria-invalid");
        return;
      }
      if (!hint) {
        hint = document.createElement("p");
        hint.className = "error live-error";
        hint.id = "interval-live-error";
        field.append(hint);
      }
      const code = input.dataset.minCode;
      hint.replaceChildren();
      if (code && Number(text) < min) {
        const badge = document.createElement("code");
        badge.className = "code";
        badge.textContent = code;
        hint.append(badge, " ");
      }
      hint.append(message);
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", hint.id);
    };
    input.addEventListener("input", check);
    check();
  }

  // The property bag: a JSON object in a textarea (what the server reads),
  // edited as rows of name/value inputs.
  function initPropertyBag(root) {
    root.querySelectorAll("textarea[data-property-bag]").forEach(function (textarea) {
      if (textarea.dataset.enhanced) return;
      let data;
      try {
        data = textarea.value.trim() ? JSON.parse(textarea.value) : {};
      } catch (e) {
        return; // leave invalid JSON visible so its error makes sense
      }
      if (data === null || typeof data !== "object" || Array.isArray(data)) return;
      textarea.dataset.enhanced = "1";
      textarea.hidden = true;

      const editor = document.createElement("div");
      editor.className = "property-bag";
      const rows = document.createElement("div");
      const add = document.createElement("button");
      add.type = "button";
      add.className = "button small";
      add.textContent = gettext("Add property");
      editor.append(rows, add);
      textarea.after(editor);

      function write() {
        const out = {};
        rows.querySelectorAll(".property-row").forEach(function (row) {
          const key = row.querySelector("[data-part=key]").value.trim();
          if (key) out[key] = row.querySelector("[data-part=value]").value;
        });
        textarea.value = Object.keys(out).length ? JSON.stringify(out, null, 2) : "";
      }

      function addRow(key, value) {
        const row = document.createElement("div");
        row.className = "property-row";
        const k = document.createElement("input");
        k.type = "text";
        k.placeholder = "name";
        k.dataset.part = "key";
        k.value = key;
        k.setAttribute("aria-label", gettext("Property name"));
        const v = document.createElement("input");
        v.type = "text";
        v.placeholder = "value";
        v.dataset.part = "value";
        v.value = value;
        v.setAttribute("aria-label", gettext("Property value"));
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "button small";
        remove.textContent = gettext("Remove");
        remove.addEventListener("click", function () {
          row.remove();
          write();
        });
        row.append(k, v, remove);
        rows.append(row);
        return k;
      }

      Object.keys(data).forEach(function (key) {
        addRow(key, String(data[key]));
      });
      rows.addEventListener("input", write);
      add.addEventListener("click", function () {
        addRow("", "").focus();
      });
    });
  }

  // "Move to a secret" (the job form): the server names the credentials
  // typed in clear (#credential-moves, by name only); the value goes from
  // the field to POST secrets/move/ and the field gets the reference back.
  // A property's text is reached through the bag's row when the bag has
  // one (a python job's "headers" is a property like any other), through
  // the kind's own field (an HTTP job's headers) otherwise.
  function propertyText(form, property) {
    const bag = form.querySelector("textarea[data-property-bag]");
    const row = Array.from(form.querySelectorAll(".property-row")).find(function (r) {
      return r.querySelector("[data-part=key]").value.trim() === property;
    });
    if (row) {
      const input = row.querySelector("[data-part=value]");
      return { get: function () { return input.value; }, set: function (text) { input.value = text; input.dispatchEvent(new Event("input", { bubbles: true })); } };
    }
    const own = form.querySelector("#id_" + CSS.escape(property) + ":not([data-property-bag])");
    if (own) return { get: function () { return own.value; }, set: function (text) { own.value = text; own.dispatchEvent(new Event("input", { bubbles: true })); } };
    if (!bag || !bag.value.trim() || !Object.prototype.hasOwnProperty.call(JSON.parse(bag.value), property)) return null;
    return {
      get: function () { return String(JSON.parse(bag.value)[property]); },
      set: function (text) { const data = JSON.parse(bag.value); data[property] = text; bag.value = JSON.stringify(data, null, 2); },
    };
  }

  // One named value (a header, a variable) inside a property's text: a JSON
  // object or "Name: value" lines.
  function entryText(outer, entry) {
    const text = outer.get();
    if (text.trim().startsWith("{")) {
      const data = JSON.parse(text);
      const key = Object.keys(data).find(function (k) { return k.trim().toLowerCase() === entry.toLowerCase(); });
      if (key === undefined) return null;
      return { get: function () { return String(data[key]); }, set: function (value) { data[key] = value; outer.set(JSON.stringify(data)); } };
    }
    const lines = text.split("\n");
    const index = lines.findIndex(function (line) {
      const at = line.indexOf(":");
      return at > 0 && line.slice(0, at).trim().toLowerCase() === entry.toLowerCase();
    });
    if (index < 0) return null;
    const name = lines[index].slice(0, lines[index].indexOf(":")).trim();
    return {
      get: function () { return lines[index].slice(lines[index].indexOf(":") + 1).trim(); },
      set: function (value) { lines[index] = name + ": " + value; outer.set(lines.join("\n")); },
    };
  }

  function moveToSecret(item) {
    const form = item.closest("form");
    const box = item.closest("#credential-moves");
    const error = item.querySelector("[data-move-error]");
    let target = null;
    try {
      target = propertyText(form, item.dataset.property);
      if (target && item.dataset.entry) target = entryText(target, item.dataset.entry);
    } catch (e) {
      target = null;
    }
    if (!target) {
      error.textContent = gettext("The value was not found: it changed since this list was drawn.");
      return;
    }
    const name = item.querySelector("[data-move-name]").value.trim();
    const token = form.querySelector("input[name=csrfmiddlewaretoken]").value;
    function send(replace) {
      const body = new URLSearchParams({ name: name, value: target.get() });
      if (replace) body.set("replace", "1");
      fetch(box.dataset.moveUrl, { method: "POST", body: body, headers: { "X-CSRFToken": token }, credentials: "same-origin" })
        .then(function (response) {
          return response.json().catch(function () { return { message: interpolate(gettext("The server could not do that (HTTP %s). Reload the page and try again."), [response.status]) }; })
            .then(function (answer) { return { status: response.status, answer: answer }; });
        })
        .then(function (result) {
          if (result.status === 409 && !replace) {
            if (window.confirm(result.answer.message)) send(true);
            return;
          }
          if (result.answer.reference) {
            error.textContent = "";
            target.set(result.answer.reference);
          } else {
            error.textContent = result.answer.message;
          }
        })
        .catch(function () {
          error.textContent = gettext("Cannot reach the server. Check the connection and try again.");
        });
    }
    send(false);
  }

  document.addEventListener("click", function (event) {
    const link = event.target.closest && event.target.closest("[data-move-secret]");
    if (!link) return;
    event.preventDefault();
    moveToSecret(link.closest(".credential-move"));
  });

  // Ticked job ids, kept across every redraw of the table (a search, a
  // refresh) until a bulk action is sent with them.
  const ticked = new Set();

  function initCheckAll(root) {
    root.querySelectorAll("[data-check-all]").forEach(function (box) {
      box.addEventListener("change", function () {
        const form = box.closest("form");
        form.querySelectorAll("input[name=" + box.dataset.checkAll + "]").forEach(function (other) {
          other.checked = box.checked;
          if (box.checked) ticked.add(other.value);
          else ticked.delete(other.value);
        });
      });
    });
    const boxes = root.querySelectorAll("#bulk-form input[name=ids], input[form=bulk-form][name=ids]");
    boxes.forEach(function (box) {
      if (ticked.has(box.value)) box.checked = true;
    });
  }

  document.addEventListener("change", function (event) {
    const box = event.target;
    if (box.matches && box.matches("#bulk-form input[name=ids]")) {
      if (box.checked) ticked.add(box.value);
      else ticked.delete(box.value);
    }
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "bulk-form") ticked.clear();
  });

  // -- live parts of pages ------------------------------------------------
  // An element with data-poll asks for itself again (its hx-get, on the
  // "poll" event) every data-poll-min seconds. While it comes back with the
  // same data-poll-version the wait grows by half, up to data-poll-max.
  // Nothing is asked while the tab is hidden; showing it refreshes at once.
  const polls = {};

  function notePoll(el) {
    if (!el.id) return;
    const min = Number(el.dataset.pollMin) || 5;
    const max = Math.max(min, Number(el.dataset.pollMax) || min);
    const version = el.dataset.pollVersion || "";
    const old = polls[el.id];
    let wait = min;
    if (old && old.polled && old.version === version) wait = Math.min(max, old.wait * 1.5);
    polls[el.id] = { wait: wait, due: Date.now() + wait * 1000, version: version, polled: false, inflight: false };
  }

  function pollNow() {
    if (document.visibilityState !== "visible" || !window.htmx) return;
    const now = Date.now();
    document.querySelectorAll("[data-poll]").forEach(function (el) {
      if (!polls[el.id]) notePoll(el);
      const state = polls[el.id];
      if (!state || state.inflight || now < state.due) return;
      state.inflight = true;
      state.polled = true;
      state.due = now + state.wait * 1000;
      window.htmx.trigger(el, "poll");
    });
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    const elt = event.detail.elt;
    if (elt && elt.hasAttribute && elt.hasAttribute("data-poll") && document.visibilityState !== "visible") {
      event.preventDefault();
      if (polls[elt.id]) polls[elt.id].inflight = false;
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    const elt = event.detail.elt;
    // Still on the page: the answer was not swapped in (an error), try again later.
    if (elt && elt.id && polls[elt.id] && document.contains(elt) && polls[elt.id].inflight) {
      polls[elt.id].inflight = false;
    }
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState !== "visible") return;
    Object.keys(polls).forEach(function (id) {
      polls[id].due = 0;
    });
    pollNow();
  });

  // A redraw (a poll, a search) replaces the part the keyboard is in: htmx
  // puts the focus back only on an element with an id. Anything else (a
  // bulk button, a link in a refreshed list) is found again in the new
  // content by what it is, or by its place, so the focus is not thrown back
  // to the top of the page. A swap that moves the focus on purpose (a
  // confirmation, the run viewer's title) is left alone.
  let keptFocus = null;

  function focusables(root) {
    return Array.from(root.querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]"));
  }

  function sameControl(a, b) {
    return (
      a.tagName === b.tagName &&
      (a.getAttribute("href") || "") === (b.getAttribute("href") || "") &&
      (a.getAttribute("name") || "") === (b.getAttribute("name") || "") &&
      (a.getAttribute("value") || "") === (b.getAttribute("value") || "") &&
      a.textContent.trim() === b.textContent.trim()
    );
  }

  // What a swap keeps is let go of when that part settles, not by the next
  // swap or another part's settle: two redraws can overlap (a part's own
  // poll beside another part's), and the second, with the focus already
  // gone, must not forget what the first kept.
  document.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    const active = document.activeElement;
    if (!target || !target.id || !active || active === document.body || !target.contains(active) || active.id) return;
    keptFocus = { target: target.id, clone: active.cloneNode(true), index: focusables(target).indexOf(active) };
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    const kept = keptFocus;
    const target = event.detail.target;
    if (!kept || !target || target.id !== kept.target) return;
    keptFocus = null;
    if (document.activeElement && document.activeElement !== document.body) return;
    const root = document.getElementById(kept.target);
    if (!root) return;
    const candidates = focusables(root);
    const match = candidates.find(function (el) {
      return sameControl(el, kept.clone);
    }) || candidates[Math.min(kept.index, candidates.length - 1)];
    if (match) match.focus({ preventScroll: true });
  });

  // "in 23 s" / "5 min ago", worded as jobs.web.templatetags.console.relative.
  function relativeText(when, now) {
    const delta = (when - now) / 1000;
    const seconds = Math.abs(delta);
    let text;
    if (seconds < 60) text = interpolate(gettext("%s s"), [Math.floor(seconds)]);
    else if (seconds < 3600) text = interpolate(gettext("%s min"), [Math.floor(seconds / 60)]);
    else if (seconds < 86400 * 2) text = interpolate(gettext("%s h"), [Math.floor(seconds / 3600)]);
    else text = interpolate(gettext("%s days"), [Math.floor(seconds / 86400)]);
    return interpolate(delta >= 0 ? gettext("in %s") : gettext("%s ago"), [text]);
  }

  function updateRelativeTimes() {
    const now = Date.now();
    document.querySelectorAll("time[data-relative]").forEach(function (el) {
      const when = Date.parse(el.getAttribute("datetime"));
      if (isNaN(when)) return;
      const text = relativeText(when, now);
      if (text === el.textContent) return;
      // Was it still ahead when last worded? (The server's wording is from page load.)
      const wasAhead = "ahead" in el.dataset ? el.dataset.ahead === "1" : when > loadedAt;
      const passed = wasAhead && when <= now;
      el.dataset.ahead = when > now ? "1" : "0";
      el.textContent = text;
      // A fire time just passed: the part around it will have news soon.
      const live = passed && el.closest("[data-poll]");
      if (live && polls[live.id]) polls[live.id].due = Math.min(polls[live.id].due, now + 2000);
    });
  }

  setInterval(function () {
    updateRelativeTimes();
    pollNow();
  }, 1000);

  // -- the top bar on a phone -----------------------------------------------
  function initNavToggle() {
    const button = document.querySelector(".nav-toggle");
    if (!button || button.dataset.ready) return;
    button.dataset.ready = "1";
    const menu = document.getElementById(button.getAttribute("aria-controls"));
    document.documentElement.classList.add("has-nav-toggle");
    button.hidden = false;
    const set = function (open) {
      button.setAttribute("aria-expanded", String(open));
      menu.classList.toggle("open", open);
    };
    button.addEventListener("click", function () {
      set(button.getAttribute("aria-expanded") !== "true");
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && button.getAttribute("aria-expanded") === "true") {
        set(false);
        button.focus();
      }
    });
  }

  // -- forms after a failed save ------------------------------------------------
  function focusErrorSummary(root) {
    const summary = root.id === "form-errors" ? root : root.querySelector && root.querySelector("#form-errors");
    if (!summary) return;
    summary.scrollIntoView({ block: "start" });
    summary.focus({ preventScroll: true });
  }

  // Editing a field marked with an error takes its mark away: the next save
  // says again if it is still wrong. (The cron expression's mark follows its
  // live preview instead, below.)
  function clearFieldError(event) {
    const field = event.target.closest && event.target.closest(".field.has-error");
    if (!field || field.id === "field-cron_expression") return;
    field.classList.remove("has-error");
    field.querySelectorAll(".error:not(.live-error)").forEach(function (error) {
      error.remove();
    });
    field.querySelectorAll("[aria-invalid]").forEach(function (input) {
      if (!field.querySelector(".live-error")) input.removeAttribute("aria-invalid");
    });
  }
  document.addEventListener("input", clearFieldError);
  document.addEventListener("change", clearFieldError);

  function syncCronField(root) {
    const preview = root.id === "cron-preview" ? root : root.querySelector && root.querySelector("#cron-preview");
    const field = document.getElementById("field-cron_expression");
    if (!preview || !field) return;
    const invalid = !!preview.querySelector("#cron-error");
    const settled = invalid || !!preview.querySelector("#cron-description");
    if (!settled) return; // still the placeholder: leave the server's verdict
    field.classList.toggle("has-error", invalid);
    const input = field.querySelector("input");
    if (invalid) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }

  // -- the run viewer -------------------------------------------------------------
  let openingViewer = false;
  let tailLog = true;
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-opens-viewer]")) openingViewer = true;
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    if (!target || target.id !== "run-viewer") return;
    const log = target.querySelector("#run-log");
    // Follow the log while its reader is at its end (or it has not started).
    tailLog = !log || log.scrollHeight - log.scrollTop - log.clientHeight < 24;
  });

  function initRunViewer(root) {
    const viewer = root.id === "run-viewer" ? root : root.querySelector && root.querySelector("#run-viewer");
    if (!viewer) return;
    const log = viewer.querySelector("#run-log");
    if (log && viewer.hasAttribute("data-poll") && tailLog) log.scrollTop = log.scrollHeight;
    if (openingViewer && viewer.children.length) {
      openingViewer = false;
      tailLog = true;
      viewer.scrollIntoView({ block: "start" });
      const title = viewer.querySelector("#run-viewer-title");
      if (title) title.focus({ preventScroll: true });
    }
  }

  // -- copy buttons ---------------------------------------------------------------
  function initCopy(root) {
    root.querySelectorAll("[data-copy]").forEach(function (button) {
      if (button.dataset.ready) return;
      button.dataset.ready = "1";
      button.hidden = false;
      const status = button.parentElement.querySelector("[data-copy-status]");
      button.addEventListener("click", function () {
        const source = document.querySelector(button.dataset.copy);
        const text = source ? source.textContent : "";
        const done = function (message) {
          if (status) status.textContent = message;
        };
        const selectIt = function () {
          const range = document.createRange();
          range.selectNodeContents(source);
          const selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          done(gettext("Selected: press Ctrl+C (⌘C) to copy."));
        };
        if (navigator.clipboard && navigator.clipboard.writeText) {
          navigator.clipboard.writeText(text).then(function () {
            done(gettext("Copied."));
          }, selectIt);
        } else {
          selectIt();
        }
      });
    });
  }

  // htmx does not swap error responses: say what happened instead of doing nothing.
  document.addEventListener("htmx:responseError", function (event) {
    const banner = document.getElementById("ajax-error");
    if (!banner) return;
    const status = event.detail.xhr.status;
    banner.textContent =
      status === 403
        ? gettext("Not allowed: you can look at this but not change it (or your session's security token expired — reload the page).")
        : interpolate(gettext("The server could not do that (HTTP %s). Reload the page and try again."), [status]);
    banner.hidden = false;
  });
  document.addEventListener("htmx:sendError", function () {
    const banner = document.getElementById("ajax-error");
    if (banner) {
      banner.textContent = gettext("Cannot reach the server. Check the connection and try again.");
      banner.hidden = false;
    }
  });

  // -- the browser's time zone ---------------------------------------------------
  // The sign-in form sends it; a user without a zone of their own reads
  // times in it from then on (jobs.web.i18n.SignInView).
  function fillBrowserZone(root) {
    if (!root.querySelectorAll) return;
    let zone = "";
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (error) { zone = ""; }
    root.querySelectorAll("input[data-browser-zone]").forEach(function (input) {
      if (!input.value) input.value = zone;
    });
  }

  // -- the "Runs after" picker ----------------------------------------------------
  // It needs this script (htmx), so it shows only with it; a change it made
  // to the upstreams is written into the form's `after` field, which the
  // form posts (jobs.web.workflow_picker).
  function initAfterPicker(root) {
    if (!root.querySelectorAll) return;
    const pickers = root.matches && root.matches("#after-picker") ? [root] : root.querySelectorAll("#after-picker");
    pickers.forEach(function (picker) {
      picker.hidden = false;
      // The JSON the picker writes stays one click away, folded (once: a
      // later redraw of the picker leaves it as the user set it).
      const json = document.getElementById("after-json");
      if (json && !json.hasAttribute("data-folded")) {
        json.setAttribute("data-folded", "");
        if (!json.querySelector(".error")) json.open = false;
      }
      const field = document.getElementById("id_after");
      if (field && picker.hasAttribute("data-after-text")) {
        field.value = picker.getAttribute("data-after-text");
      }
    });
  }

  function init(root) {
    fillBrowserZone(root);
    initAfterPicker(root);
    initToggles(root);
    initPropertyBag(root);
    initCheckAll(root);
    initNavToggle();
    initCopy(root);
    initRunViewer(root);
    syncCronField(root);
    focusErrorSummary(root);
    // A part that asks something (bulk delete's confirmation) takes the focus.
    const ask = root.matches && root.matches("[data-autofocus]") ? root : root.querySelector && root.querySelector("[data-autofocus]");
    if (ask) {
      ask.scrollIntoView({ block: "start" });
      ask.focus({ preventScroll: true });
    }
    if (root.hasAttribute && root.hasAttribute("data-poll")) notePoll(root);
    if (root.querySelectorAll) root.querySelectorAll("[data-poll]").forEach(notePoll);
    updateRelativeTimes();
  }

  if (window.htmx) {
    window.htmx.onLoad(init);
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      init(document.body);
    });
  }
})();
