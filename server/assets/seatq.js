// seatq's pages: one small script, no build step. The checkout page talks
// to the JSON API (/api/requests, with an Idempotency-Key per step) like
// any producer; every page refreshes its [data-refresh] part from the
// server, which draws everything.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));
const afterRefresh = [];
// The seats of a map (the legend draws circles of the same classes).
const SEATS = "svg.seatmap circle.seat";

// Replace each [data-refresh] element's content with the server's, every data-every ms.
function liveParts() {
  for (const part of $$("[data-refresh]")) {
    const every = Number(part.dataset.every || 2000);
    const tick = async () => {
      try {
        const r = await fetch(part.dataset.refresh, { credentials: "same-origin" });
        if (r.ok) {
          part.innerHTML = await r.text();
          afterRefresh.forEach((f) => f(part));
        }
      } catch (e) { /* the next tick tries again */ }
      setTimeout(tick, every);
    };
    setTimeout(tick, every);
  }
}

// A random key (crypto.randomUUID needs a secure context; this does not).
function newKey(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return prefix + "-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const money = (cents) => (cents / 100).toFixed(2);

// ---- the checkout page ----
function shop() {
  const root = $("section.shop");
  const event = Number(root.dataset.event);
  const holdSeconds = Number(root.dataset.holdSeconds);
  const selected = new Set();
  let hold = null; // {booking, customer, token, heldUntil, seats}
  let offset = 0; // server clock minus ours, in ms
  let ticker = null;
  let lapses = null;

  const say = (text, ok = false) => { const m = $("#message"); m.textContent = text; m.classList.toggle("ok", ok); };
  const customer = () => $("#customer").value.trim();

  function drawSelection() {
    const seats = $$(SEATS).filter((c) => selected.has(Number(c.dataset.seat)));
    const total = seats.reduce((sum, c) => sum + Number(c.dataset.price), 0);
    $("#selection").textContent = seats.length
      ? seats.map((c) => c.dataset.name).join("; ") + " — total " + money(total)
      : "No seats chosen.";
    $("#hold").disabled = seats.length === 0 || hold !== null;
  }

  // After each refresh: keep the choice where the seats are still free, mark our hold.
  function remark() {
    let lost = 0;
    for (const c of $$(SEATS)) {
      const n = Number(c.dataset.seat);
      if (selected.has(n)) {
        if (c.classList.contains("free")) c.classList.add("selected");
        else { selected.delete(n); lost += 1; }
      }
      if (hold && hold.seats.includes(n) && !$("#hold-panel").dataset.state.match(/lapsed|cancelled/)) c.classList.add("mine");
    }
    if (lost) say(lost + " of your chosen seats were taken by someone else meanwhile.");
    drawSelection();
  }
  afterRefresh.push(remark);

  document.addEventListener("click", (e) => {
    const c = e.target.closest && e.target.closest(SEATS);
    if (!c || hold) return;
    if (!c.classList.contains("free")) { say("That seat is not free."); return; }
    const n = Number(c.dataset.seat);
    if (selected.has(n)) { selected.delete(n); c.classList.remove("selected"); }
    else if (selected.size >= 9) { say("At most 9 seats at once."); return; }
    else { selected.add(n); c.classList.add("selected"); }
    say("");
    drawSelection();
  });

  // A hold token: 32 bytes from the browser's CSPRNG, URL-safe base64. The
  // hold answers to it alone; it lives in this page's memory, never stored.
  function newToken() {
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  const bearer = (token) => ({ Authorization: "Bearer " + token });

  // Follow a hold's lapse (Server-Sent Events read through fetch, which,
  // unlike EventSource, can send the token in a header rather than the URL).
  function follow(booking, token, onLapsed) {
    const stop = new AbortController();
    (async () => {
      const r = await fetch("/api/holds/" + booking + "/lapsed", { headers: bearer(token), signal: stop.signal });
      if (!r.ok || !r.body) return;
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let seen = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        seen += value;
        if (/^event: lapsed$/m.test(seen)) { onLapsed(); return; }
      }
    })().catch(() => {});
    return { close: () => stop.abort() };
  }

  // Send a request (carrying `token`) and wait for its outcome: {record} or {error}.
  async function send(kind, payload, token) {
    payload = { ...payload, token };
    const r = await fetch("/api/requests?wait=20", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Idempotency-Key": newKey("shop-" + kind) },
      body: JSON.stringify({ kind, payload }),
    });
    // The server's clock, from its Date header (whole seconds): trusted
    // only where it disagrees with ours by more than its precision.
    const date = r.headers.get("Date");
    if (date) {
      const skew = Date.parse(date) + 500 - Date.now();
      offset = Math.abs(skew) > 1000 ? skew : 0;
    }
    let body = await r.json();
    if (!r.ok) return { error: body.error };
    while (body.status === "queued") {
      const w = await fetch("/api/requests/" + body.id + "/wait?timeout=20", { headers: bearer(token) });
      body = await w.json();
      if (!w.ok) return { error: body.error };
    }
    return { record: body };
  }

  const refused = (record) => ({ code: record.error_code, message: record.error_message });
  const named = (seats) => seats.map((s) => (s.label ? `${s.section}, row ${s.row_label}, seat ${s.label}` : "seat " + s.seat)).join("; ");

  async function holdWith(payload) {
    if (!customer()) { say("Enter your name first."); $("#customer").focus(); return; }
    $$("#pick button").forEach((b) => (b.disabled = true));
    say("Holding…", true);
    const token = newToken();
    const { record, error } = await send("hold", { ...payload, event, customer: customer(), hold_seconds: holdSeconds }, token);
    const failed = error || (record.status !== "succeeded" && refused(record));
    if (failed) {
      say(failed.code + ": " + failed.message);
      $$("#pick button").forEach((b) => (b.disabled = false));
      drawSelection();
      return;
    }
    const b = record.result;
    hold = { booking: b.booking, event: b.event, customer: b.customer, token, heldUntil: Date.parse(b.held_until), seats: b.seats.map((s) => s.seat) };
    selected.clear();
    $$(SEATS + ".selected").forEach((c) => c.classList.remove("selected"));
    hold.seats.forEach((n) => { const c = $(`${SEATS}[data-seat="${n}"]`); if (c) c.setAttribute("class", "seat held mine"); });
    $("#pick").hidden = true;
    const panel = $("#hold-panel");
    panel.hidden = false;
    panel.dataset.state = "held";
    panel.dataset.booking = b.booking;
    $("#hold-title").textContent = "Your seats are held";
    $("#hold-seats").textContent = named(b.seats);
    $("#hold-total").textContent = money(b.total_cents);
    $("#hold-message").textContent = "";
    $("#confirm").disabled = false;
    $("#cancel").disabled = false;
    say("");
    tick();
    ticker = setInterval(tick, 250);
    lapses = follow(b.booking, token, () => lapsed("The sweeper released them."));
  }

  function tick() {
    const left = Math.max(0, hold.heldUntil - (Date.now() + offset));
    const secs = Math.ceil(left / 1000);
    $("#countdown").textContent = Math.floor(secs / 60) + ":" + String(secs % 60).padStart(2, "0");
    if (left <= 0) lapsed("");
  }

  function finish(state, title, text) {
    clearInterval(ticker);
    if (lapses) lapses.close();
    const panel = $("#hold-panel");
    panel.dataset.state = state;
    $("#hold-title").textContent = title;
    $("#hold-message").textContent = text;
    $("#confirm").disabled = true;
    $("#cancel").disabled = true;
    $("#again").hidden = false;
  }

  function lapsed(why) {
    if ($("#hold-panel").dataset.state !== "held") return;
    $("#countdown").textContent = "0:00";
    finish("lapsed", "Your hold lapsed", ("Your hold lapsed: the seats are free to others again. " + why).trim());
    $$(SEATS + ".mine").forEach((c) => c.classList.remove("mine"));
  }

  async function settle(kind) {
    $("#confirm").disabled = true;
    $("#cancel").disabled = true;
    const { record, error } = await send(kind, { booking: hold.booking, event: hold.event, customer: hold.customer }, hold.token);
    const failed = error || (record.status !== "succeeded" && refused(record));
    if (failed && failed.code === "hold_expired") return lapsed("");
    if (failed) {
      say(failed.code + ": " + failed.message);
      $("#confirm").disabled = false;
      $("#cancel").disabled = false;
      return;
    }
    if (kind === "confirm") {
      finish("booked", "Booked", "Booking " + record.result.booking + " is yours: " + named(record.result.seats) + ".");
    } else {
      finish("cancelled", "Cancelled", "Your hold is cancelled; the seats are free to others.");
      $$(SEATS + ".mine").forEach((c) => c.classList.remove("mine"));
    }
  }

  $("#hold").addEventListener("click", () => holdWith({ seats: Array.from(selected).sort((a, b) => a - b) }));
  $("#hold-best").addEventListener("click", () => holdWith({
    class: Number($("#class").value), party: Number($("#party").value), together: $("#together").checked,
  }));
  $("#confirm").addEventListener("click", () => settle("confirm"));
  $("#cancel").addEventListener("click", () => settle("cancel"));
  $("#again").addEventListener("click", () => {
    hold = null;
    $("#hold-panel").hidden = true;
    $("#hold-panel").dataset.state = "none";
    $("#again").hidden = true;
    $("#pick").hidden = false;
    $$("#pick button").forEach((b) => (b.disabled = false));
    drawSelection();
  });
  drawSelection();
}

// ---- the dashboard ----
function dashboard() {
  const say = (text, ok = false) => { const m = $("#message"); if (m) { m.textContent = text; m.classList.toggle("ok", ok); } };
  async function retry(path, what) {
    const r = await fetch(path, { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" } });
    const body = await r.json();
    if (!r.ok) { say(body.error.code + ": " + body.error.message); return; }
    say("Requeued " + what + ": " + (body.requeued.join(", ") || "none"), true);
  }
  document.addEventListener("click", (e) => {
    const one = e.target.closest && e.target.closest("[data-retry]");
    if (one) retry("/api/ops/dead/" + one.dataset.retry + "/retry", "request " + one.dataset.retry);
    const all = e.target.closest && e.target.closest("[data-retry-all]");
    if (all) retry("/api/ops/dead/retry", "every dead request");
  });
}

document.addEventListener("DOMContentLoaded", () => {
  liveParts();
  if (document.body.dataset.page === "shop") shop();
  if (document.body.dataset.page === "dashboard") dashboard();
});
