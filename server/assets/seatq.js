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
          const html = await r.text();
          const restore = keep(part);
          part.innerHTML = html;
          afterRefresh.forEach((f) => f(part));
          restore();
        }
      } catch (e) { /* the next tick tries again */ }
      setTimeout(tick, every);
    };
    setTimeout(tick, every);
  }
}

// What redrawing `part` would take from the customer: how far a map was
// panned sideways (a phone's map pans in its box), and the seat focused
// with the keyboard (else every redraw would throw a keyboard user back to
// the top of the page). Returns what puts them back.
function keep(part) {
  const scrolls = $$("[data-keep-scroll]", part).map((e) => [e.dataset.keepScroll, e.scrollLeft, e.scrollTop]);
  const seats = $$(SEATS, part);
  const focused = seats.indexOf(document.activeElement);
  return () => {
    for (const [key, left, top] of scrolls) {
      const e = $(`[data-keep-scroll="${key}"]`, part);
      if (e) { e.scrollLeft = left; e.scrollTop = top; }
    }
    if (focused < 0) return;
    // The same seat, or, if it was taken meanwhile, the next one free.
    const next = $$(SEATS, part).slice(focused).find((c) => c.hasAttribute("tabindex"));
    if (next) next.focus({ preventScroll: true });
  };
}

// Whether each map is wider than its box, so that the page says it pans.
function pans() {
  for (const column of $$(".map-column")) {
    const box = $(".mapbox", column);
    column.classList.toggle("pans", Boolean(box) && box.scrollWidth > box.clientWidth + 1);
  }
}

// A random key (crypto.randomUUID needs a secure context; this does not).
function newKey(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return prefix + "-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// "A", "A and B", "A, B and C".
function listed(names) {
  return names.length < 2 ? names.join("") : names.slice(0, -1).join(", ") + " and " + names[names.length - 1];
}

// ---- the checkout page ----
function shop() {
  const root = $("section.shop");
  const event = Number(root.dataset.event);
  const holdSeconds = Number(root.dataset.holdSeconds);
  // How long a customer who joins the waiting list waits for seats
  // (seatq serve's page: ?wait_seconds=N, half an hour by default).
  const waitSeconds = Number(root.dataset.waitSeconds);
  // The server says which currency prices are in (seatq serve --currency).
  const money = (cents) => root.dataset.moneyPrefix + (cents / 100).toFixed(2);
  const selected = new Set();
  let hold = null; // {booking, customer, token, heldUntil, seats}
  let offer = null; // the party a refusal offers the waiting list to: {class, party, together}
  let waiting = false; // on the waiting list (or joining it): the map is not for picking
  let offset = 0; // server clock minus ours, in ms
  let ticker = null;
  let lapses = null;

  // A message for the customer; a refusal's code goes with it, small, for
  // whoever helps them (and its message, for the same, in the tooltip).
  const say = (text, ok = false, code = "", detail = "") => {
    const m = $("#message");
    m.textContent = text;
    m.classList.toggle("ok", ok);
    m.dataset.code = code;
    m.title = code ? code + ": " + detail : "";
    if (code) {
      const small = document.createElement("small");
      small.className = "code";
      small.textContent = "Code for support: " + code;
      m.append(small);
    }
  };
  const customer = () => $("#customer").value.trim();
  const seat = (n) => $(`${SEATS}[data-seat="${n}"]`);
  const shortName = (n) => (seat(n) ? seat(n).dataset.short : "Seat " + n);
  const placeName = (k) => { const o = $(`#class option[value="${k}"]`); return o ? o.dataset.name : "that part of the house"; };

  // A seat ticked or not, for the eye (its class) and for a screen reader.
  function tick(c, on) {
    c.classList.toggle("selected", on);
    c.setAttribute("aria-checked", String(on));
  }

  // A seat no longer to be picked: `state` (held, booked), out of the tab order.
  function taken(c, state) {
    c.setAttribute("class", "seat " + state);
    c.removeAttribute("tabindex");
    c.setAttribute("aria-disabled", "true");
    c.setAttribute("aria-checked", String(state.includes("mine")));
  }

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
    const lost = [];
    for (const c of $$(SEATS)) {
      const n = Number(c.dataset.seat);
      if (selected.has(n)) {
        if (c.classList.contains("free")) tick(c, true);
        else { selected.delete(n); lost.push(c.dataset.short); }
      }
      if (hold && hold.seats.includes(n) && !$("#hold-panel").dataset.state.match(/lapsed|cancelled/)) c.classList.add("mine");
    }
    if (lost.length === 1) say(`${lost[0]} was taken by someone else meanwhile. Pick another seat.`);
    else if (lost.length) say(`${listed(lost)} were taken by someone else meanwhile. Pick other seats.`);
    drawSelection();
    pans();
  }
  afterRefresh.push(remark);

  // Pick or put back a seat, by click, tap or key.
  function toggle(c) {
    if (hold || waiting) return;
    if (!c.classList.contains("free")) { say("That seat is not free."); return; }
    const n = Number(c.dataset.seat);
    if (selected.has(n)) { selected.delete(n); tick(c, false); }
    else if (selected.size >= 9) { say("At most 9 seats at once."); return; }
    else { selected.add(n); tick(c, true); }
    say("");
    drawSelection();
  }

  document.addEventListener("click", (e) => {
    const c = e.target.closest && e.target.closest(SEATS);
    if (c) toggle(c);
  });

  // The free seat next to `c` in a direction (the arrow keys): along its
  // row, or in the nearest row above or below, the nearest across.
  function neighbour(c, [dx, dy]) {
    const [x, y] = [Number(c.getAttribute("cx")), Number(c.getAttribute("cy"))];
    let best = null;
    let score = Infinity;
    for (const s of $$(SEATS + "[tabindex]")) {
      const [sx, sy] = [Number(s.getAttribute("cx")), Number(s.getAttribute("cy"))];
      const ahead = dx ? sy === y && (sx - x) * dx > 0 : (sy - y) * dy > 0;
      const d = dx ? Math.abs(sx - x) : Math.abs(sy - y) * 1e6 + Math.abs(sx - x);
      if (ahead && d < score) { best = s; score = d; }
    }
    return best;
  }

  // Seats are checkboxes: Space (or Enter) ticks one, arrows move between them.
  document.addEventListener("keydown", (e) => {
    const c = e.target.closest && e.target.closest(SEATS);
    if (!c || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === " " || e.key === "Enter") { e.preventDefault(); toggle(c); return; }
    const step = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[e.key];
    const next = step && neighbour(c, step);
    if (next) { e.preventDefault(); next.focus(); }
  });

  // The seats a refusal names ("seat(s) 19, 20 are taken ..."), by number.
  const seatsIn = (message) => (/^seat\(s\) ([\d, ]+)/.exec(message || "") || ["", ""])[1].split(",").map(Number).filter(Boolean);

  // A refusal in the customer's words. `asked` is what the request asked
  // for; `message` is seatq's, read only for the seats and counts it names.
  function plain(code, message, asked) {
    const where = asked.class ? placeName(asked.class) : "that part of the house";
    const names = seatsIn(message).map(shortName);
    switch (code) {
      case "seats_taken":
        if (/waiting list/.test(message || "")) {
          return `${names.length ? listed(names) : "Those seats"} ${names.length === 1 ? "is" : "are"} kept for customers on the waiting list. Join the list to take your turn.`;
        }
        if (names.length === 1) return `${names[0]} was just taken by someone else. Pick another seat.`;
        if (names.length) return `${listed(names)} were just taken by someone else. Pick other seats.`;
        return "One of your seats was just taken by someone else. Pick another seat.";
      case "seat_not_for_sale":
        if (names.length) return `${listed(names)} ${names.length === 1 ? "is" : "are"} not for sale. Pick another seat.`;
        return "One of those seats is not for sale. Pick another seat.";
      case "sold_out": {
        if (/waiting list .*closed/.test(message || "")) return `${where} is sold out, and its waiting list is closed.`;
        if (asked.wait_seconds) return `No seats in ${where} came free for you before your wait ended. Choose another part of the house, or join the waiting list again.`;
        if (/parties are waiting/.test(message || "")) return `${where} is sold out: other customers are waiting for its seats. Join the waiting list to take your turn.`;
        const left = Number((/^(\d+) seat/.exec(message || "") || [0, 0])[1]);
        if (!left) return `${where} is sold out. Choose another part of the house.`;
        return `Only ${left} ${left === 1 ? "seat is" : "seats are"} left in ${where}. Choose fewer seats, or another part of the house.`;
      }
      case "no_adjacent_seats":
        return `No row in ${where} has ${asked.party} free seats side by side. Untick “side by side”, or choose fewer seats.`;
      case "customer_limit_exceeded": {
        // (The worker's words, or the waiting list's when seats came free for a party over the limit.)
        const m = /at most (\d+) seat\(s\) per customer; the customer has (\d+)/.exec(message || "") ||
          /allows (\d+) seats per customer; .* has (\d+), and/.exec(message || "");
        if (!m) return "That is more seats than one customer may buy for this event. Choose fewer seats.";
        const [limit, has] = [Number(m[1]), Number(m[2])];
        return `You can buy at most ${limit} ${limit === 1 ? "seat" : "seats"} for this event` +
          (has ? `, and you have ${has} already.` : ".") + " Choose fewer seats.";
      }
      case "not_on_sale": return "Sales for this event have not opened yet. Please come back when they open.";
      case "sales_closed": return "Sales for this event have closed: no more seats can be bought.";
      case "hold_expired": return "Your hold ran out before it was confirmed, so the seats were released. Choose seats again.";
      case "booking_cancelled": return "This hold was cancelled already. Choose seats again.";
      case "not_held": return "These seats are booked already: there is nothing left to confirm.";
      case "booking_not_found": return "We cannot find this hold any more. Reload the page and choose your seats again.";
      case "unknown_event": return "This event is no longer on sale here.";
      case "unknown_seat": return "That seat is no longer on the map. Reload the page and pick again.";
      case "unknown_class": return `There are no seats in ${where} for this event. Choose another part of the house.`;
      case "party_out_of_range": case "too_many_seats": return "You can choose 1 to 9 seats at a time.";
      case "rate_limited": return "That was a lot of tries in a short time. Please wait a minute, then try again.";
      case "unauthenticated": case "customer_mismatch": return "Please sign in again, then try once more.";
      case "invalid_request": case "wrong_type": return "That could not be accepted. Please check your name and your choice, then try again.";
      case "unreachable": case "timeout": case "internal": case "too_many_connections":
        return "Something went wrong on our side. Please try again in a moment.";
      default: return "Sorry, that did not work. Please try again, or ask us for help with the code below.";
    }
  }
  const refuse = (failed, asked) => say(plain(failed.code, failed.message, asked), false, failed.code, failed.message);

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

  // An answer's JSON, or, where there is none (a proxy's error page, a
  // connection lost), an error the customer can be told of.
  async function json(r) {
    try { return await r.json(); } catch (e) { return { error: { code: r.ok ? "internal" : "unreachable", message: "HTTP " + r.status } }; }
  }

  // The server's clock, from an answer's Date header (whole seconds):
  // trusted only where it disagrees with ours by more than its precision.
  function clock(r) {
    const date = r.headers.get("Date");
    if (date) {
      const skew = Date.parse(date) + 500 - Date.now();
      offset = Math.abs(skew) > 1000 ? skew : 0;
    }
  }

  // Whether an error may pass if asked again (the request itself stands).
  const passing = (error) => ["unreachable", "timeout", "too_many_connections", "rate_limited"].includes(error && error.code);
  const pause = (ms) => new Promise((done) => setTimeout(done, ms));

  // Send a request (carrying `token`) and wait for its outcome: {record} or
  // {error}. Not finished yet, it is `queued` or, having asked to wait for
  // seats, `waiting` on the waiting list: each time the server answers so
  // (at once on joining, then whenever its place changes, or every 20 s),
  // `pending(record)` shows where it stands, and the page asks again.
  async function send(kind, payload, token, pending = () => {}) {
    payload = { ...payload, token };
    let body;
    try {
      const r = await fetch("/api/requests?wait=20", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Idempotency-Key": newKey("shop-" + kind) },
        body: JSON.stringify({ kind, payload }),
      });
      clock(r);
      body = await json(r);
      if (!r.ok || body.error) return { error: body.error };
    } catch (e) {
      return { error: { code: "unreachable", message: String(e) } };
    }
    const id = body.id;
    while (body.status === "queued" || body.status === "waiting") {
      pending(body);
      let answer;
      try {
        const w = await fetch("/api/requests/" + id + "/wait?timeout=20", { headers: bearer(token) });
        clock(w);
        answer = await json(w);
        if (!w.ok && !answer.error) answer = { error: { code: "unreachable", message: "HTTP " + w.status } };
      } catch (e) {
        answer = { error: { code: "unreachable", message: String(e) } };
      }
      // The request stands whatever became of one answer: a customer on
      // the waiting list keeps their place through a lost connection.
      if (answer.error && passing(answer.error)) { await pause(2000); continue; }
      if (answer.error) return { error: answer.error };
      body = answer;
    }
    return { record: body };
  }

  const refused = (record) => ({ code: record.error_code, message: record.error_message });
  const named = (seats) => seats.map((s) => (s.label ? `${s.section}, row ${s.row_label}, seat ${s.label}` : "seat " + s.seat)).join("; ");

  // "30 minutes", "10 minutes", "1 hour", "90 seconds".
  function duration(secs) {
    const [n, unit] = secs % 3600 === 0 ? [secs / 3600, "hour"] : secs % 60 === 0 ? [secs / 60, "minute"] : [secs, "second"];
    return `${n} ${unit}${n === 1 ? "" : "s"}`;
  }
  const seatsWord = (n) => `${n} ${n === 1 ? "seat" : "seats"}`;

  // Hold `payload`'s seats; with `wait`, on the waiting list if they are sold out.
  async function holdWith(payload, wait = false) {
    if (!customer()) { say("Enter your name first."); $("#customer").focus(); return; }
    $$("#pick button, #wait-actions button").forEach((b) => (b.disabled = true));
    say(wait ? "Joining the waiting list…" : "Holding…", true);
    const token = newToken();
    const asked = { ...payload, event, customer: customer(), hold_seconds: holdSeconds };
    if (wait) asked.wait_seconds = waitSeconds;
    const { record, error } = await send("hold", asked, token, wait ? placed : undefined);
    const failed = error || (record.status !== "succeeded" && refused(record));
    if (failed) {
      leaveList();
      $("#pick").hidden = false;
      refuse(failed, asked);
      // Seats someone else took are shown so at once, not at the next redraw.
      if (failed.code === "seats_taken" || failed.code === "seat_not_for_sale") {
        for (const n of seatsIn(failed.message)) {
          selected.delete(n);
          if (seat(n)) taken(seat(n), failed.code === "seats_taken" ? "held" : "not_for_sale");
        }
      }
      $$("#pick button").forEach((b) => (b.disabled = false));
      drawSelection();
      if (!wait) offerList(failed, payload);
      return;
    }
    leaveList();
    held(record.result, token);
  }

  // Held (at once, or handed over from the waiting list): the seats, the
  // total and the countdown, to confirm or cancel.
  function held(b, token) {
    hold = { booking: b.booking, event: b.event, customer: b.customer, token, heldUntil: Date.parse(b.held_until), seats: b.seats.map((s) => s.seat) };
    selected.clear();
    $$(SEATS + ".selected").forEach((c) => tick(c, false));
    hold.seats.forEach((n) => { if (seat(n)) taken(seat(n), "held mine"); });
    $("#pick").hidden = true;
    const panel = $("#hold-panel");
    panel.hidden = false;
    panel.dataset.state = "held";
    panel.dataset.booking = b.booking;
    $("#hold-title").textContent = "Your seats are held";
    $("#hold-seats").textContent = named(b.seats);
    $("#hold-total").textContent = money(b.total_cents);
    $("#hold-message").textContent = "";
    $("#countdown-label").hidden = false;
    $("#confirm").disabled = false;
    $("#cancel").disabled = false;
    say("");
    countdown();
    ticker = setInterval(countdown, 250);
    lapses = follow(b.booking, token, () => lapsed("The sweeper released them."));
  }

  // ---- the waiting list ----
  // A refusal for want of seats offers the waiting list to the same party:
  // its size and class, the cheapest seats first (side by side if asked).
  // A request naming seats cannot wait, so named seats are offered as a
  // party of as many in their class, where that class has no seat left to
  // pick (or the seats are kept for the list).
  function offerList(failed, payload) {
    let party = null;
    if (failed.code === "sold_out" || failed.code === "no_adjacent_seats") {
      if (/waiting list .*closed/.test(failed.message || "")) return;
      if (payload.class) party = { class: payload.class, party: payload.party, together: Boolean(payload.together) };
    } else if (failed.code === "seats_taken" && payload.seats && payload.seats.length) {
      const classes = new Set(payload.seats.map((n) => seat(n) && seat(n).dataset.class));
      const [k] = classes;
      const none = $$(SEATS + ".free").every((c) => c.dataset.class !== k);
      if (classes.size === 1 && k && (none || /waiting list/.test(failed.message || ""))) {
        party = { class: Number(k), party: payload.seats.length, together: false };
      }
    }
    if (!party) return;
    offer = party;
    const where = placeName(party.class);
    $("#pick").hidden = true;
    const panel = $("#wait-panel");
    panel.hidden = false;
    panel.dataset.state = "offer";
    $("#wait-title").textContent = "Join the waiting list";
    const [comes, they] = party.party === 1 ? ["comes", "it is"] : ["come", "the cheapest are"];
    $("#wait-text").textContent =
      `When ${seatsWord(party.party)} in ${where} ${comes} free${party.together ? " side by side" : ""}, ` +
      `${they} held for you at once, for ${duration(holdSeconds)}, to confirm and pay as any hold. ` +
      `You wait up to ${duration(waitSeconds)}; keep this page open.`;
    $("#wait-place").textContent = "";
    $("#wait-ahead").textContent = "";
    $("#wait-note").textContent = "";
    $("#wait-actions").hidden = false;
    $("#join").disabled = false;
    $("#wait-back").disabled = false;
    // The button the customer pressed is hidden with the picker: the
    // keyboard goes on from the offer.
    $("#join").focus({ preventScroll: true });
  }

  // Where a request that asked to wait stands (a record not yet finished):
  // its number on the waiting list and the seats wanted ahead of it.
  function placed(record) {
    waiting = true;
    $("#pick").hidden = true;
    const panel = $("#wait-panel");
    panel.hidden = false;
    $("#wait-actions").hidden = true;
    const place = record.place;
    const ahead = place ? place.parties_ahead : null;
    const until = new Date(Date.parse(record.created_at) + waitSeconds * 1000 - offset);
    const where = offer ? placeName(offer.class) : "that part of the house";
    const party = offer ? seatsWord(offer.party) : "your seats";
    $("#wait-text").textContent = "";
    if (record.status === "waiting") {
      panel.dataset.state = "waiting";
      $("#wait-title").textContent = `Waiting for ${party} in ${where}`;
      $("#wait-place").textContent = ahead === null ? "You are on the waiting list" : `You are number ${ahead + 1} on the waiting list`;
      $("#wait-ahead").textContent = ahead === null ? "" : ahead === 0
        ? "No one is ahead of you: the next seats that come free are yours."
        : `Ahead of you: ${ahead} ${ahead === 1 ? "party wanting" : "parties wanting"} ${seatsWord(place.seats_ahead || 0)} in all.`;
      $("#wait-note").textContent =
        "As soon as seats come free for you, they are held for you and shown here, with the time left to pay. " +
        `Keep this page open: you wait until ${until.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}.`;
    } else {
      // Queued: in the event's line, served in the order customers came.
      panel.dataset.state = "line";
      $("#wait-title").textContent = "Joining the waiting list";
      $("#wait-place").textContent = ahead === null ? "In the line…" : `You are number ${ahead + 1} in the line`;
      $("#wait-ahead").textContent = "Customers are served in the order they came.";
      $("#wait-note").textContent = "";
    }
    say("");
  }

  // Off the waiting list (served, or the wait ended): the panel goes.
  function leaveList() {
    waiting = false;
    offer = null;
    $("#wait-panel").hidden = true;
    $("#wait-panel").dataset.state = "none";
  }

  function countdown() {
    const left = Math.max(0, hold.heldUntil - (Date.now() + offset));
    const secs = Math.ceil(left / 1000);
    $("#countdown").textContent = Math.floor(secs / 60) + ":" + String(secs % 60).padStart(2, "0");
    if (left <= 0) lapsed("");
  }

  // The hold is over (`state`): the countdown stops, and says how it ended
  // where time no longer matters (`ended`).
  function finish(state, title, text, ended = "") {
    clearInterval(ticker);
    if (lapses) lapses.close();
    const panel = $("#hold-panel");
    panel.dataset.state = state;
    $("#hold-title").textContent = title;
    $("#hold-message").textContent = text;
    if (ended) {
      $("#countdown-label").hidden = true;
      $("#countdown").textContent = ended;
    }
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
      refuse(failed, {});
      $("#confirm").disabled = false;
      $("#cancel").disabled = false;
      return;
    }
    if (kind === "confirm") {
      finish("booked", "Booked", "Booking " + record.result.booking + " is yours: " + named(record.result.seats) + ".",
        "Booked — your seats are yours");
    } else {
      finish("cancelled", "Cancelled", "Your hold is cancelled; the seats are free to others.", "Cancelled — the seats are released");
      $$(SEATS + ".mine").forEach((c) => c.classList.remove("mine"));
    }
  }

  $("#hold").addEventListener("click", () => holdWith({ seats: Array.from(selected).sort((a, b) => a - b) }));
  $("#hold-best").addEventListener("click", () => holdWith({
    class: Number($("#class").value), party: Number($("#party").value), together: $("#together").checked,
  }));
  // The party offered stays in `offer` while it waits: the place names its seats.
  $("#join").addEventListener("click", () => {
    if (offer) holdWith({ class: offer.class, party: offer.party, together: offer.together }, true);
  });
  $("#wait-back").addEventListener("click", () => {
    leaveList();
    $("#pick").hidden = false;
    $$("#pick button").forEach((b) => (b.disabled = false));
    say("");
    drawSelection();
  });
  $("#confirm").addEventListener("click", () => settle("confirm"));
  $("#cancel").addEventListener("click", () => settle("cancel"));
  $("#again").addEventListener("click", () => {
    hold = null;
    $("#hold-panel").hidden = true;
    $("#hold-panel").dataset.state = "none";
    $("#again").hidden = true;
    $("#countdown-label").hidden = false;
    $("#countdown").textContent = "–";
    $("#pick").hidden = false;
    $$("#pick button").forEach((b) => (b.disabled = false));
    say("");
    drawSelection();
  });

  // On a phone the action bar is fixed to the bottom of the screen (and a
  // message just above it): the page keeps room for both under its end,
  // so that neither hides the last of the page.
  const room = () => {
    const fixed = (e) => e && e.getClientRects().length > 0 && getComputedStyle(e).position === "fixed";
    const bar = $$(".bar").find(fixed);
    const said = $("#message");
    document.body.style.setProperty("--bar", (bar ? bar.getBoundingClientRect().height : 0) + "px");
    document.body.style.setProperty("--said", (fixed(said) ? said.getBoundingClientRect().height : 0) + "px");
  };
  const watch = new ResizeObserver(room);
  [...$$(".bar"), $("#message")].forEach((e) => watch.observe(e));
  window.addEventListener("resize", () => { room(); pans(); });
  drawSelection();
  pans();
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
