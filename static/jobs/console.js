// Cronboard console: small progressive enhancements. Every page works
// without this file; with it, the job form shows only the fields that apply
// and the property bag gets a key/value editor.
(function () {
  "use strict";

  function showMatching(root, attr, value) {
    root.querySelectorAll("[" + attr + "]").forEach(function (el) {
      el.hidden = el.getAttribute(attr) !== value;
    });
  }

  function initToggles(root) {
    const form = root.querySelector ? (root.matches && root.matches("#job-form") ? root : root.querySelector("#job-form")) : null;
    if (!form) return;
    const kind = form.querySelector("[name=kind]");
    const schedule = form.querySelector("[name=schedule_type]");
    const update = function () {
      if (kind) showMatching(form, "data-kind", kind.value);
      if (schedule) showMatching(form, "data-schedule", schedule.value);
    };
    if (kind) kind.addEventListener("change", update);
    if (schedule) schedule.addEventListener("change", update);
    update();
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
      add.textContent = "Add property";
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
        k.setAttribute("aria-label", "Property name");
        const v = document.createElement("input");
        v.type = "text";
        v.placeholder = "value";
        v.dataset.part = "value";
        v.value = value;
        v.setAttribute("aria-label", "Property value");
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "button small";
        remove.textContent = "Remove";
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

  function initCheckAll(root) {
    root.querySelectorAll("[data-check-all]").forEach(function (box) {
      box.addEventListener("change", function () {
        const form = box.closest("form");
        form.querySelectorAll("input[name=" + box.dataset.checkAll + "]").forEach(function (other) {
          other.checked = box.checked;
        });
      });
    });
  }

  document.addEventListener("click", function (event) {
    const closer = event.target.closest("[data-close]");
    if (closer) {
      const target = document.querySelector(closer.dataset.close);
      if (target) target.replaceChildren();
    }
  });

  // htmx does not swap error responses: say what happened instead of doing nothing.
  document.addEventListener("htmx:responseError", function (event) {
    const banner = document.getElementById("ajax-error");
    if (!banner) return;
    const status = event.detail.xhr.status;
    banner.textContent =
      status === 403
        ? "Not allowed: you can look at this but not change it (or your session's security token expired — reload the page)."
        : "The server could not do that (HTTP " + status + "). Reload the page and try again.";
    banner.hidden = false;
  });
  document.addEventListener("htmx:sendError", function () {
    const banner = document.getElementById("ajax-error");
    if (banner) {
      banner.textContent = "Cannot reach the server. Check the connection and try again.";
      banner.hidden = false;
    }
  });

  function init(root) {
    initToggles(root);
    initPropertyBag(root);
    initCheckAll(root);
  }

  if (window.htmx) {
    window.htmx.onLoad(init);
  } else {
    document.addEventListener("DOMContentLoaded", function () {
      init(document.body);
    });
  }
})();
