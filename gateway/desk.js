"use strict";
// The referee desk: every answer comes from the referee through the gateway's JSON routes (same
// origin, so no CORS); this script only asks and draws. Card faces are the symbols
// referee.render made (#card-CODE, #card-back); the layout around them follows render.py's.
(() => {
  const $ = (id) => document.getElementById(id);
  const OUTCOMES = ["CONFIRMED", "WRONG", "INVALID", "ILLEGAL", "NO_CLAIM", "MALFORMED"];
  const CHUNK_CASES = 50; // cases per POST: the progress bar moves, a failed chunk costs little
  const CHUNK_BYTES = 256 * 1024; // well under the gateway's 1 MiB body limit
  const LISTED = 500; // rows of the case list at most; the download holds every verdict
  const CW = 36, CH = 50, CARD_GAP = 4, GROUP_GAP = 12, PAD = 6, LABEL = 14, MARGIN = 12, LINE = 16;
  const BOX_H = CH + 2 * PAD + LABEL, NAME_COLUMN = 150;
  const INK = "#212121", MUTED = "#555555", GOOD = "#2e7d32", BAD = "#c62828", JOKER = "#6a1b9a";
  const FONTS = document.querySelector("#symbols svg").getAttribute("font-family");
  const KIND_LABELS = { GROUP_KIND_RUN: "run", GROUP_KIND_SAME_RANK: "same rank", GROUP_KIND_JOKERS_ONLY: "jokers" };
  const SUITS = { "♣": "C", "♦": "D", "♥": "H", "♠": "S" };
  const PRETTY = { C: "♣", D: "♦", H: "♥", S: "♠" };
  const GROUP_BOX = ["#eef6f0", "#5b8f6a", false], LOOSE_BOX = ["#fff4e5", "#d08a2c", true];
  const CLAIMED_BOX = ["#eef3fb", "#5b7fb0", false];

  // Reading protobuf JSON: the referee prints proto names; a pasted file may use lowerCamel.
  const f = (message, name, fallback) => {
    if (message == null || typeof message !== "object") return fallback;
    if (name in message) return message[name];
    const camel = name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
    return camel in message ? message[camel] : fallback;
  };
  const list = (value) => (Array.isArray(value) ? value : []);
  const esc = (text) =>
    String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const num = (v) => String(Math.round(v * 10) / 10);

  /** A card's canonical code (AH, 10S, JK), or "" when it is none (drawn as an unknown card). */
  function canon(code) {
    let text = String(code).trim().replace(/\ufe0f/g, "").toUpperCase();
    if (text === "JK") return "JK";
    const suit = SUITS[text.slice(-1)] || text.slice(-1);
    let rank = text.slice(0, -1);
    if (rank === "T") rank = "10";
    text = rank + suit;
    return /^(A|[2-9]|10|J|Q|K)[CDHS]$/.test(text) ? text : "";
  }
  const pretty = (code) => {
    const c = canon(code);
    return c && c !== "JK" ? c.slice(0, -1) + PRETTY[c.slice(-1)] : c || String(code);
  };
  const standIn = (code) => (code ? pretty(code) : "any");

  // The drawing pieces -----------------------------------------------------------------------

  class Canvas {
    constructor() { this.parts = []; this.width = 0; this.height = 0; }
    add(part, right, bottom) {
      this.parts.push(part);
      this.width = Math.max(this.width, right);
      this.height = Math.max(this.height, bottom);
    }
    text(x, y, text, { size = 13, fill = INK, bold = false, anchor = "start" } = {}) {
      const width = String(text).length * size * 0.6;
      const right = anchor === "start" ? x + width : anchor === "middle" ? x + width / 2 : x;
      const weight = bold ? ' font-weight="700"' : "";
      const align = anchor === "start" ? "" : ` text-anchor="${anchor}"`;
      this.add(`<text x="${num(x)}" y="${num(y)}" font-size="${size}" fill="${fill}"${weight}${align}>${esc(text)}</text>`,
        right, y + size * 0.3);
    }
    svg(title, kind) {
      const w = num(this.width + MARGIN), h = num(this.height + MARGIN);
      return `<svg xmlns="http://www.w3.org/2000/svg" class="drawing" data-drawing="${kind}" width="${w}" height="${h}" ` +
        `viewBox="0 0 ${w} ${h}" role="img" aria-label="${esc(title)}" font-family="${esc(FONTS)}">` +
        `<title>${esc(title)}</title><rect width="${w}" height="${h}" fill="#ffffff"/>${this.parts.join("")}</svg>`;
    }
  }

  function card(x, y, code, standsFor) {
    const c = canon(code);
    const at = `transform="translate(${num(x)},${num(y)})"`;
    if (!c) {
      return `<g class="card unknown" data-card="${esc(code)}" ${at}><rect width="${CW}" height="${CH}" rx="4" ` +
        `fill="#ffffff" stroke="${BAD}" stroke-dasharray="3 2"/><text x="18" y="30" font-size="10" ` +
        `text-anchor="middle" fill="${BAD}">${esc(String(code).slice(0, 5))}</text></g>`;
    }
    let label = "", stands = "";
    if (c === "JK" && standsFor != null) {
      stands = ` data-stands-for="${esc(standsFor)}"`;
      label = `<text x="18" y="46" font-size="11" font-weight="700" text-anchor="middle" fill="${JOKER}">` +
        `${esc(standIn(standsFor))}</text>`;
    }
    return `<g class="card" data-card="${c}"${stands} ${at}><use href="#card-${c}" width="${CW}" height="${CH}"/>${label}</g>`;
  }

  function faceDown(x, y, code) {
    return `<g class="card back" data-card="${esc(canon(code) || "")}" transform="translate(${num(x)},${num(y)})">` +
      `<use href="#card-back" width="${CW}" height="${CH}"/></g>`;
  }

  const cardsWidth = (count) => count * CW + Math.max(0, count - 1) * CARD_GAP;

  /** Cards in a box with a label under them, as one <g class="box"> (a page or a test reads a
   * group's cards from it); the x where the next box starts. */
  function box(cv, x, y, drawn, count, label, [fill, stroke, dashed]) {
    const width = Math.max(cardsWidth(count), label.length * 11 * 0.6) + 2 * PAD;
    const dash = dashed ? ' stroke-dasharray="5 3"' : "";
    cv.add(`<g class="box" data-label="${esc(label)}"><rect x="${num(x)}" y="${num(y)}" width="${num(width)}" ` +
      `height="${BOX_H}" rx="6" fill="${fill}" stroke="${stroke}"${dash}/>` + drawn.join("") +
      `<text x="${num(x + width / 2)}" y="${num(y + PAD + CH + 12)}" font-size="11" fill="${MUTED}" ` +
      `text-anchor="middle">${esc(label)}</text></g>`, x + width, y + BOX_H);
    return x + width + GROUP_GAP;
  }

  function group(cv, x, y, g) {
    const cards = list(f(g, "cards", [])), stands = list(f(g, "stands_for", []));
    const drawn = cards.map((c, i) =>
      card(x + PAD + i * (CW + CARD_GAP), y + PAD, c, canon(c) === "JK" ? (stands[i] ?? "") : undefined));
    return box(cv, x, y, drawn, cards.length, KIND_LABELS[f(g, "kind", "")] || "group", GROUP_BOX);
  }

  function loose(cv, x, y, cards, label, style = LOOSE_BOX) {
    const drawn = cards.map((c, i) => card(x + PAD + i * (CW + CARD_GAP), y + PAD, c));
    return box(cv, x, y, drawn, cards.length, label, style);
  }

  function linking(cv, x, y, l, points = true) {
    const groups = list(f(l, "groups", [])), unlinked = list(f(l, "unlinked", []));
    for (const g of groups) x = group(cv, x, y, g);
    if (unlinked.length) {
      x = loose(cv, x + GROUP_GAP, y, unlinked, points ? `unlinked: ${f(l, "points", 0)} points` : "unlinked");
    } else if (!groups.length) {
      cv.text(x, y + BOX_H / 2, "no cards", { fill: MUTED });
      x += 80;
    }
    return x;
  }

  function badge(cv, x, y, text, colour) {
    const width = text.length * 14 * 0.7 + 20;
    cv.add(`<g class="badge"><rect x="${num(x)}" y="${num(y)}" width="${num(width)}" height="24" rx="12" fill="${colour}"/>` +
      `<text x="${num(x + width / 2)}" y="${num(y + 17)}" font-size="14" font-weight="700" fill="#ffffff" ` +
      `text-anchor="middle">${esc(text)}</text></g>`, x + width, y + 24);
    return x + width;
  }

  function paragraph(cv, x, y, text, fill = INK, width = 90) {
    const lines = [];
    let line = "";
    for (const word of String(text).split(/\s+/)) {
      if (line && (line + " " + word).length > width) { lines.push(line); line = word; } else line = line ? line + " " + word : word;
    }
    lines.push(line);
    for (const one of lines.slice(0, 8)) { y += LINE; cv.text(x, y, one, { fill }); }
    return y + 4;
  }

  const kindName = (kind) => String(kind || "").replace(/^CLOSE_KIND_/, "").replace(/_/g, " ");
  const kindText = (close) => `${kindName(f(close, "kind"))} ×${f(close, "multiplier", 0)}`;
  const validKind = (close) => f(close, "valid", false) && kindName(f(close, "kind")) && kindName(f(close, "kind")) !== "UNSPECIFIED";

  function closeGroups(close) {
    return { groups: f(close, "groups", []), unlinked: f(close, "unlinked", []), points: 0 };
  }

  function downCard(cv, x, y, code) {
    cv.add(faceDown(x, y, code), x + CW, y + CH);
    cv.text(x + CW / 2, y + CH + 12, `down: ${pretty(code)}`, { size: 11, fill: MUTED, anchor: "middle" });
  }

  // The drawings -----------------------------------------------------------------------------

  function linkingDrawing(l, title) {
    const cv = new Canvas();
    title = title || `Best linking: ${f(l, "points", 0)} points`;
    cv.text(MARGIN, MARGIN + 12, title, { size: 14, bold: true });
    linking(cv, MARGIN, MARGIN + 22, l);
    return cv.svg(title, "linking");
  }

  function closeDrawing(close, title = "Close verdict") {
    const cv = new Canvas();
    cv.text(MARGIN, MARGIN + 12, title, { size: 14, bold: true });
    let y = MARGIN + 22;
    badge(cv, MARGIN, y, validKind(close) ? kindText(close) : "no valid close", validKind(close) ? GOOD : BAD);
    y += 32;
    const after = linking(cv, MARGIN, y, closeGroups(close), false);
    if (f(close, "discard")) downCard(cv, after + GROUP_GAP, y + PAD, f(close, "discard"));
    y += BOX_H;
    if (!f(close, "valid", false) && f(close, "reason")) paragraph(cv, MARGIN, y, f(close, "reason"), BAD);
    return cv.svg(title, "close");
  }

  function closeHeader(cv, y, close) {
    if (validKind(close)) { badge(cv, MARGIN, y, `close: ${kindText(close)}`, GOOD); return y + 28; }
    badge(cv, MARGIN, y, "no valid close: nothing scores", BAD);
    return f(close, "reason") ? paragraph(cv, MARGIN, y + 24, f(close, "reason"), BAD) : y + 28;
  }

  function rowTags(cv, y, name, tags) {
    const shown = String(name).length > 18 ? String(name).slice(0, 17) + "…" : String(name);
    cv.text(MARGIN + 6, y + 22, shown, { size: 14, bold: true });
    tags.forEach(([tag, colour], i) => cv.text(MARGIN + 6, y + 40 + i * 15, tag, { size: 12, fill: colour, bold: true }));
  }

  function dealDrawing(result, title = "Scored deal") {
    const cv = new Canvas();
    cv.text(MARGIN, MARGIN + 12, title, { size: 14, bold: true });
    const close = f(result, "close", {});
    const top = closeHeader(cv, MARGIN + 22, close) + 22;
    let y = top;
    const rows = [];
    for (const player of list(f(result, "players", []))) {
      let x = MARGIN + NAME_COLUMN;
      if (f(player, "closer", false)) {
        x = linking(cv, x, y + 4, closeGroups(close), false);
        if (f(close, "discard")) { downCard(cv, x, y + 4 + PAD, f(close, "discard")); x += CW + GROUP_GAP; }
      } else {
        x = linking(cv, x, y + 4, f(player, "linking", {}));
      }
      rows.push([y, x, player]);
      y += BOX_H + 8;
    }
    const numbers = Math.max(MARGIN + NAME_COLUMN, ...rows.map(([, x]) => x)) + 8;
    [["points", 0], ["change", 70], ["score", 140]].forEach(([label, offset]) =>
      cv.text(numbers + offset + 56, top - 6, label, { size: 12, fill: MUTED, anchor: "end" }));
    const right = numbers + 210, backgrounds = [];
    for (const [rowY, , player] of rows) {
      const closer = f(player, "closer", false);
      backgrounds.push(`<rect class="player" data-name="${esc(f(player, "name", ""))}" data-points="${esc(f(player, "points", 0))}" ` +
        `data-change="${esc(f(player, "score_change", 0))}" data-score="${esc(f(player, "score", 0))}" ` +
        `x="${MARGIN}" y="${num(rowY)}" width="${num(right - MARGIN)}" ` +
        `height="${BOX_H + 8}" fill="${closer ? "#fff8e1" : "#fafafa"}" stroke="${closer ? "#f9a825" : "#e0e0e0"}"/>`);
      const tags = [];
      if (closer) tags.push(["★ closer", "#a66f00"]);
      if (f(player, "eliminated", false)) tags.push(["OUT", BAD]);
      rowTags(cv, rowY, f(player, "name", ""), tags);
      const middle = rowY + BOX_H / 2 + 8, change = Number(f(player, "score_change", 0));
      cv.text(numbers + 56, middle, String(f(player, "points", 0)), { size: 14, anchor: "end" });
      cv.text(numbers + 126, middle, change > 0 ? `+${change}` : String(change),
        { size: 14, fill: change > 0 ? GOOD : change < 0 ? BAD : INK, bold: true, anchor: "end" });
      cv.text(numbers + 196, middle, String(f(player, "score", 0)), { size: 14, bold: true, anchor: "end" });
    }
    cv.parts.unshift(...backgrounds);
    cv.width = Math.max(cv.width, right);
    if (f(result, "match_over", false) && f(result, "winner")) {
      cv.text(MARGIN, y + 20, `Match over: ${f(result, "winner")} wins`, { size: 14, bold: true, fill: GOOD });
    }
    return cv.svg(title, "deal");
  }

  const violationCode = (v) => String(f(v, "code", "")).replace(/^VIOLATION_CODE_/, "");
  // What a record proves about its deck order (referee.play.shuffle.ShuffleProof's sentences).
  const PROOFS = {
    SHUFFLE_PROOF_COMMITTED: "shuffle committed: the revealed seed matches the hash published before the deal",
    SHUFFLE_PROOF_UNCOMMITTED: "shuffle seeded but not committed: nothing shows the order was fixed before the deal",
    SHUFFLE_PROOF_EXPLICIT_DECK: "deck stated in the record: nothing shows when the order was chosen",
  };
  const proofText = (reply) => {
    const violation = f(reply, "violation"), proof = f(reply, "shuffle_proof", "");
    if (proof === "SHUFFLE_PROOF_COMMITTED" && violation && violationCode(violation) === "SEED_MISMATCH") {
      return "shuffle committed, and the revealed seed does not match the hash published before the deal";
    }
    return PROOFS[proof] || "";
  };

  function replayDrawing(reply, title) {
    const cv = new Canvas();
    const violation = f(reply, "violation");
    cv.text(MARGIN, MARGIN + 12, title, { size: 14, bold: true });
    let y = MARGIN + 22;
    const close = f(f(reply, "result", {}), "close", {});
    if (violation) {
      badge(cv, MARGIN, y, `turn ${f(violation, "turn", 0)}: ${violationCode(violation)}`, BAD);
      y = paragraph(cv, MARGIN, y + 24, f(violation, "message", ""), BAD);
    } else if (f(reply, "complete", false) && validKind(close)) {
      badge(cv, MARGIN, y, `closed: ${kindText(close)}`, GOOD);
      y += 32;
    } else {
      badge(cv, MARGIN, y, "legal so far", GOOD);
      y += 32;
    }
    if (proofText(reply)) y = paragraph(cv, MARGIN, y, proofText(reply), MUTED);
    let x = MARGIN;
    const pile = list(f(f(reply, "discard_pile", {}), "cards", [])), stock = list(f(f(reply, "stock", {}), "cards", []));
    if (pile.length) cv.add(card(x, y, pile[pile.length - 1]), x + CW, y + CH);
    cv.text(x + CW / 2, y + CH + 14, `pile ${pile.length}`, { size: 11, fill: MUTED, anchor: "middle" });
    x += CW + 24;
    if (stock.length) cv.add(faceDown(x, y, ""), x + CW, y + CH);
    cv.text(x + CW / 2, y + CH + 14, `stock ${stock.length}`, { size: 11, fill: MUTED, anchor: "middle" });
    if (f(reply, "discard")) downCard(cv, x + CW + 24, y, f(reply, "discard"));
    y += CH + 28;
    const closer = f(reply, "closer"), toPlay = f(reply, "to_play"), rows = [];
    let right = 0;
    list(f(reply, "hands", [])).forEach((hand, seat) => {
      let x2 = MARGIN + NAME_COLUMN;
      if (seat === closer && f(reply, "complete", false) && f(close, "groups")) {
        x2 = linking(cv, x2, y + 4, closeGroups(close), false);
      } else {
        const drawn = [];
        for (const c of list(f(hand, "cards", []))) { drawn.push(card(x2 + PAD, y + 4 + PAD, c)); x2 += CW + CARD_GAP; }
        cv.add(`<g class="hand" data-seat="${seat}">${drawn.join("")}</g>`, x2 + PAD, y + 4 + PAD + CH);
        x2 += PAD;
      }
      right = Math.max(right, x2);
      rows.push(y);
      const tags = [];
      const fault = violation && seat === f(violation, "seat", -1);
      if (fault) tags.push(["at fault", BAD]);
      if (seat === toPlay) tags.push(["to play", GOOD]);
      if (seat === closer) tags.push(["★ closer", "#a66f00"]);
      rowTags(cv, y, f(hand, "name", `seat ${seat}`), tags);
      y += BOX_H + 8;
    });
    const backgrounds = rows.map((rowY, seat) => {
      const fault = violation && seat === f(violation, "seat", -1);
      return `<rect class="${fault ? "seat fault" : "seat"}" data-seat="${seat}" x="${MARGIN}" y="${num(rowY)}" ` +
        `width="${num(right + 8 - MARGIN)}" height="${BOX_H + 8}" fill="${fault ? "#fdecea" : "#fafafa"}" ` +
        `stroke="${fault ? BAD : "#e0e0e0"}" stroke-width="${fault ? 3 : 1}"/>`;
    });
    cv.parts.unshift(...backgrounds);
    cv.width = Math.max(cv.width, right + 8);
    cv.height = Math.max(cv.height, y);
    return cv.svg(title, "replay");
  }

  function claimedDrawing(groups, leftOut, title) {
    const cv = new Canvas();
    cv.text(MARGIN, MARGIN + 12, title, { size: 14, bold: true });
    let x = MARGIN;
    groups.forEach((g, i) => { x = loose(cv, x, MARGIN + 22, g, `claimed group ${i}`, CLAIMED_BOX); });
    if (leftOut.length) loose(cv, x + GROUP_GAP, MARGIN + 22, leftOut, "left out");
    return cv.svg(title, "claimed");
  }

  function cardsDrawing(cards, title, note, discard) {
    const cv = new Canvas();
    cv.text(MARGIN, MARGIN + 12, title, { size: 14, bold: true });
    const y = MARGIN + 22;
    let x = MARGIN;
    for (const c of cards) { cv.add(card(x, y, c), x + CW, y + CH); x += CW + CARD_GAP; }
    if (discard) downCard(cv, x + GROUP_GAP, y, discard);
    if (note) paragraph(cv, MARGIN, y + CH + 14, note);
    return cv.svg(title, "cards");
  }

  function claimsTable(claims) {
    if (!list(claims).length) return "";
    const rows = list(claims).map((c) =>
      `<tr data-verdict="${esc(String(f(c, "verdict", "")).replace(/^VERDICT_/, ""))}"><td>${esc(f(c, "field", ""))}</td>` +
      `<td>${esc(String(f(c, "verdict", "")).replace(/^VERDICT_/, ""))}</td><td>${esc(f(c, "claimed", ""))}</td>` +
      `<td>${esc(f(c, "expected", ""))}</td><td>${esc(f(c, "reason", ""))}</td></tr>`).join("");
    return `<table class="claims"><tr><th>claim</th><th>verdict</th><th>claimed</th><th>the referee</th><th>why</th></tr>${rows}</table>`;
  }

  // Calls and their errors -------------------------------------------------------------------

  class CallError extends Error {
    constructor(status, sentence, violations = [], retryMs = 0) {
      super(sentence);
      this.status = status;
      this.violations = violations;
      this.retryMs = retryMs;
    }
  }

  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  const sentence = (text) => {
    const t = String(text).trim();
    return t ? t[0].toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? "" : ".") : "";
  };
  /** A field path for people: "players[1].cards[4]" is "player 2, card 5". */
  function fieldWords(path) {
    return String(path).split(".").filter(Boolean).map((part) =>
      part.replace(/^([a-z_]+?)(s?)\[(\d+)\]$/, (_, name, plural, i) => `${name} ${Number(i) + 1}`).replace(/_/g, " "))
      .join(", ");
  }

  function headers() {
    const out = { "content-type": "application/json" };
    const key = $("key").value.trim();
    if (key) out.authorization = `Bearer ${key}`;
    return out;
  }

  async function send(path, body) {
    try {
      return await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
    } catch (error) {
      throw new CallError(0, `The gateway did not answer (${error.message}): is it running?`);
    }
  }

  /** The sentence for a failed reply (a google.rpc.Status as JSON), with its field violations. */
  async function failure(reply) {
    let status = {};
    try { status = await reply.json(); } catch (_) { /* the status line alone says enough */ }
    const message = String(status.message || reply.statusText || "no message");
    const details = list(status.details);
    const bad = details.find((d) => String(d["@type"]).endsWith("google.rpc.BadRequest"));
    const violations = list(bad && (bad.field_violations || bad.fieldViolations)).map((v) => ({
      field: String(v.field || ""),
      sentence: sentence(`${fieldWords(v.field || "")}: ${v.description || ""}`),
    }));
    const retry = details.find((d) => String(d["@type"]).endsWith("google.rpc.RetryInfo"));
    const delay = retry && parseFloat(String(retry.retry_delay || retry.retryDelay || "1s"));
    const retryMs = Math.max(200, Math.round((delay || 1) * 1000));
    switch (reply.status) {
      case 401: return new CallError(401, sentence(`The referee refused the API key: ${message}`));
      case 403: return new CallError(403, sentence(`The referee refused this call: ${message}`));
      case 429: return new CallError(429, `This key has used its calls for now: try again in ${Math.ceil(retryMs / 1000)} s.`, [], retryMs);
      case 502: case 503: return new CallError(reply.status, "The referee is not reachable just now: try again in a moment.");
      case 504: return new CallError(504, "The referee took too long over this call.");
      case 413: return new CallError(413, "That is too large for one call (the gateway takes at most 1 MiB).");
      default: {
        // A JSON field of the wrong type is the gateway's finding: "rules.decks: ..." names it.
        const named = /^([a-z_][\w.[\]]*): (.*)$/s.exec(message);
        if (!violations.length && reply.status === 400 && named) {
          violations.push({ field: named[1], sentence: sentence(`${fieldWords(named[1])}: ${named[2]}`) });
        }
        const first = violations.length ? violations[0].sentence : sentence(message);
        return new CallError(reply.status, first, violations);
      }
    }
  }

  async function call(path, body) {
    const reply = await send(path, body);
    if (!reply.ok) throw await failure(reply);
    return reply.json();
  }

  function clearErrors(panel) {
    for (const p of document.querySelectorAll(`#${panel} .error, #key-error`)) p.textContent = "";
    for (const input of document.querySelectorAll(`#${panel} [aria-invalid]`)) input.removeAttribute("aria-invalid");
  }

  /** Each sentence next to the field at fault: the error line of the panel's input named by the
   * path's first part, else the panel's own. */
  function showError(panel, error, fieldOf = (top) => `${panel}-${top}`) {
    if (!(error instanceof CallError)) error = new CallError(0, sentence(String(error && error.message || error)));
    if ([401, 403, 429].includes(error.status)) { $("key-error").textContent = error.message; $("key").setAttribute("aria-invalid", "true"); return; }
    if (!error.violations.length) { $(`${panel}-error`).textContent = error.message; return; }
    for (const v of error.violations) {
      const top = v.field.split(/[.[]/)[0];
      const id = fieldOf(top);
      const line = id && $(`${id}-error`);
      const target = line || $(`${panel}-error`);
      target.textContent = target.textContent ? `${target.textContent} ${v.sentence}` : v.sentence;
      if (line && $(id)) $(id).setAttribute("aria-invalid", "true");
    }
  }

  const codes = (text) => String(text).split(/[\s,;]+/).filter(Boolean);

  // Tabs -------------------------------------------------------------------------------------

  function select(name) {
    for (const tab of document.querySelectorAll("nav [role=tab]")) {
      const on = tab.getAttribute("aria-controls") === name;
      tab.setAttribute("aria-selected", String(on));
      $(tab.getAttribute("aria-controls")).hidden = !on;
    }
  }
  for (const tab of document.querySelectorAll("nav [role=tab]")) {
    tab.addEventListener("click", () => { select(tab.getAttribute("aria-controls")); history.replaceState(null, "", `#${tab.getAttribute("aria-controls")}`); });
  }
  if (["hand", "close", "deal", "disputes"].includes(location.hash.slice(1))) select(location.hash.slice(1));
  $("key").addEventListener("input", () => { $("key-error").textContent = ""; $("key").removeAttribute("aria-invalid"); });

  async function busy(button, work) {
    button.disabled = true;
    try { await work(); } finally { button.disabled = false; }
  }

  // The hand ---------------------------------------------------------------------------------

  const picker = $("hand-picker");
  for (const symbol of document.querySelectorAll("#symbols symbol[id^=card-]")) {
    const code = symbol.id.slice(5);
    if (code === "back") continue;
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.card = code;
    button.setAttribute("aria-label", `add ${pretty(code)}`);
    button.innerHTML = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${CW} ${CH}" font-family="${esc(FONTS)}"><use href="#card-${code}"/></svg>`;
    button.addEventListener("click", () => {
      const now = codes($("hand-cards").value);
      now.push(code);
      $("hand-cards").value = now.join(" ");
    });
    picker.appendChild(button);
  }
  $("hand-clear").addEventListener("click", () => { $("hand-cards").value = ""; $("hand-out").innerHTML = ""; clearErrors("hand"); });

  $("hand-form").addEventListener("submit", (event) => {
    event.preventDefault();
    busy($("hand-solve"), async () => {
      clearErrors("hand");
      $("hand-out").innerHTML = "";
      try {
        const reply = await call("/v1/hands:solve", { cards: codes($("hand-cards").value) });
        $("hand-out").innerHTML = linkingDrawing(reply.linking);
      } catch (error) { showError("hand", error); }
    });
  });

  // The close --------------------------------------------------------------------------------

  $("close-form").addEventListener("submit", (event) => {
    event.preventDefault();
    busy($("close-check"), async () => {
      clearErrors("close");
      $("close-out").innerHTML = "";
      const body = { cards: codes($("close-cards").value) };
      const discard = $("close-discard").value.trim();
      if (discard) body.discard = discard;
      if ($("close-kind").value) body.claimed_kind = $("close-kind").value;
      const multiplier = $("close-multiplier").value.trim();
      if (multiplier) {
        if (!/^-?\d{1,9}$/.test(multiplier)) {
          $("close-multiplier-error").textContent = `The claimed multiplier is a whole number, not “${multiplier.slice(0, 20)}”.`;
          return;
        }
        body.claimed_multiplier = Number(multiplier);
      }
      try {
        const reply = await call("/v1/closes:check", body);
        $("close-out").innerHTML = closeDrawing(reply.close) + claimsTable(reply.claims);
      } catch (error) {
        showError("close", error, (top) => ({ cards: "close-cards", discard: "close-discard", claimed_kind: "close-kind",
          claimed_multiplier: "close-multiplier" })[top]);
      }
    });
  });

  // The deal or record, stepped through ------------------------------------------------------

  const stepping = { request: null, total: 0, last: 0, replies: new Map(), at: 0 };

  function turnWords(turn, k) {
    if (!turn) return "";
    const seat = f(turn, "seat");
    const who = seat == null ? "The player to play" : `Seat ${seat}`;
    const from = f(turn, "draw") === "DRAW_SOURCE_DISCARD" ? "the discard pile" : "the stock";
    const drawn = f(turn, "drawn") ? ` (${pretty(f(turn, "drawn"))})` : "";
    const action = f(turn, "close", false) ? `closes, laying ${pretty(f(turn, "discard", ""))} face down`
      : `throws ${pretty(f(turn, "discard", ""))}`;
    return `Turn ${k}: ${who} draws from ${from}${drawn} and ${action}.`;
  }

  async function replayAt(k) {
    if (stepping.replies.has(k)) return stepping.replies.get(k);
    const request = structuredClone(stepping.request);
    request.record.turns = list(request.record.turns).slice(0, k);
    const reply = await call("/v1/deals:replay", request);
    stepping.replies.set(k, reply);
    return reply;
  }

  async function showStep(k) {
    k = Math.max(0, Math.min(stepping.last, k));
    clearErrors("deal");
    let reply;
    try { reply = await replayAt(k); } catch (error) { showError("deal", error, () => "deal-json"); return; }
    stepping.at = k;
    $("step-turn").value = String(k);
    const violation = f(reply, "violation");
    $("step-label").textContent = `turn ${k} of ${stepping.total}` + (violation ? ": the first violation" : "");
    const turns = list(f(stepping.request.record, "turns", []));
    $("step-turn-text").textContent = k ? turnWords(turns[k - 1], k) : "The deal as dealt, before the first turn.";
    let out = replayDrawing(reply, violation ? `Turn ${f(violation, "turn", k)}: the first violation` : `Deal after turn ${k}`);
    if (f(reply, "complete", false) && f(reply, "result")) out += dealDrawing(f(reply, "result"), "The deal scored") + claimsTable(f(reply, "claims", []));
    $("deal-out").innerHTML = out;
    $("step-first").disabled = $("step-prev").disabled = k === 0;
    $("step-next").disabled = $("step-last").disabled = k === stepping.last;
  }

  $("step-first").addEventListener("click", () => showStep(0));
  $("step-prev").addEventListener("click", () => showStep(stepping.at - 1));
  $("step-next").addEventListener("click", () => showStep(stepping.at + 1));
  $("step-last").addEventListener("click", () => showStep(stepping.last));
  $("step-turn").addEventListener("change", () => showStep(Number($("step-turn").value)));

  $("deal-form").addEventListener("submit", (event) => {
    event.preventDefault();
    busy($("deal-score"), async () => {
      clearErrors("deal");
      $("deal-out").innerHTML = "";
      $("steps").hidden = true;
      let pasted;
      try { pasted = JSON.parse($("deal-json").value); } catch (error) {
        $("deal-json-error").textContent = sentence(`This is not JSON: ${error.message}`);
        $("deal-json").setAttribute("aria-invalid", "true");
        return;
      }
      const object = pasted && typeof pasted === "object" && !Array.isArray(pasted) ? pasted : {};
      const fields = (top) => (top ? "deal-json" : null);
      try {
        if ("record" in object || ("seats" in object && "turns" in object)) {
          const request = "record" in object ? object : { record: object };
          if (!request.record || typeof request.record !== "object") request.record = {};
          stepping.request = request;
          stepping.replies = new Map();
          stepping.total = list(f(request.record, "turns", [])).length;
          const whole = await call("/v1/deals:replay", request);
          stepping.replies.set(stepping.total, whole);
          const violation = f(whole, "violation");
          stepping.last = violation ? Math.min(stepping.total, Number(f(violation, "turn", 0))) : stepping.total;
          if (stepping.last !== stepping.total) stepping.replies.delete(stepping.total);
          if (violation) stepping.replies.set(stepping.last, whole);
          $("step-turn").max = String(stepping.last);
          $("steps").hidden = false;
          await showStep(stepping.last);
        } else if ("deal" in object || "players" in object) {
          const request = "deal" in object ? object : { deal: object };
          const reply = await call("/v1/deals:score", request);
          $("deal-out").innerHTML = dealDrawing(reply) + claimsTable(reply.claims);
        } else {
          $("deal-json-error").textContent = "Paste a ScoreDealRequest (with “deal”), a Deal (with “players”), a " +
            "ReplayDealRequest (with “record”) or a DealRecord (with “seats” and “turns”).";
          $("deal-json").setAttribute("aria-invalid", "true");
        }
      } catch (error) { showError("deal", error, fields); }
    });
  });

  // Disputes ---------------------------------------------------------------------------------

  const batch = { cases: [], verdicts: [], counts: {}, stop: false, name: "disputes" };
  const outcomeOf = (verdict) => String(f(verdict, "outcome", "")).replace(/^DISPUTE_OUTCOME_/, "") || "UNREADABLE";

  function malformed(id, field, value, message) {
    return { id, outcome: "DISPUTE_OUTCOME_MALFORMED", claims: [], error: { field, value: String(value).slice(0, 80), message } };
  }

  /** The cases of a JSON Lines file: a line that is no JSON object is judged here, MALFORMED,
   * as the batch command does; a case without an id is known by its line. */
  function readCases(text) {
    const cases = [];
    text.split(/\r?\n/).forEach((raw, index) => {
      if (!raw.trim()) return;
      const line = index + 1;
      let value;
      try { value = JSON.parse(raw); } catch (error) {
        cases.push({ line, local: malformed(`line:${line}`, "line", raw.trim(), `not a case in protobuf JSON: ${error.message}`) });
        return;
      }
      if (!value || typeof value !== "object" || Array.isArray(value)) {
        cases.push({ line, local: malformed(`line:${line}`, "line", raw.trim(), "not a case in protobuf JSON: not an object") });
        return;
      }
      if (typeof value.id !== "string" || !value.id) value.id = `line:${line}`;
      cases.push({ line, value });
    });
    return cases;
  }

  function chunks(cases) {
    const out = [];
    let now = [], bytes = 0;
    for (const item of cases) {
      const size = item.value ? JSON.stringify(item.value).length : 0;
      if (now.length && (now.length >= CHUNK_CASES || bytes + size > CHUNK_BYTES)) { out.push(now); now = []; bytes = 0; }
      now.push(item);
      bytes += size;
    }
    if (now.length) out.push(now);
    return out;
  }

  /** Verdicts of some cases, one each in their order. A key's quota can cut an array short
   * (the verdicts that came are kept, the rest sent again after a pause) or refuse it (429: wait
   * as the referee says); an array the gateway cannot read at all (a field of the wrong type in
   * one case) is judged case by case, so only the case at fault is MALFORMED. */
  async function judge(items) {
    let pending = items.filter((item) => item.value);
    const verdicts = [];
    for (let attempt = 0; pending.length; attempt++) {
      const reply = await send("/v1/disputes:check", pending.map((item) => item.value));
      if (reply.ok) {
        let parsed = null;
        try { parsed = JSON.parse(await reply.text()); } catch (_) { parsed = null; }
        if (Array.isArray(parsed) && parsed.length) {
          verdicts.push(...parsed.slice(0, pending.length));
          pending = pending.slice(parsed.length);
          attempt = 0;
        } else if (attempt >= 20) {
          throw new CallError(0, "The referee's replies kept breaking off; stopped.");
        }
        if (pending.length) {
          $("disputes-status").textContent = `${batch.verdicts.length + verdicts.length} of ${batch.cases.length} cases judged; waiting for the key's quota`;
          await sleep(1000);
        }
        continue;
      }
      const error = await failure(reply);
      if (error.status === 429 && attempt < 60) { $("disputes-status").textContent = error.message; await sleep(error.retryMs); continue; }
      if (error.status === 400 && pending.length > 1) {
        for (const item of pending) verdicts.push(...(await judge([item])));
        break;
      }
      if (error.status === 400) {
        const v = error.violations[0] || { field: "", sentence: error.message };
        verdicts.push(malformed(pending[0].value.id, v.field || "case", "", v.sentence));
        break;
      }
      throw error;
    }
    let next = 0;
    return items.map((item) => item.local || verdicts[next++]);
  }

  function countsTable() {
    const rows = OUTCOMES.map((name) =>
      `<tr><td><span class="outcome ${name}">${name}</span></td><td class="n" data-outcome="${name}">${batch.counts[name] || 0}</td></tr>`);
    const total = batch.verdicts.length;
    $("disputes-counts").innerHTML = `<tr><th>outcome</th><th>cases</th></tr>${rows.join("")}` +
      `<tr><th>judged</th><th class="n" id="disputes-total">${total}</th></tr>`;
  }

  function why(verdict) {
    const error = f(verdict, "error");
    if (error && (f(error, "field") || f(error, "message"))) return `${f(error, "field", "")}: ${f(error, "message", "")}`.replace(/^: /, "");
    const violation = f(f(verdict, "record", {}), "violation");
    if (violation) return f(violation, "message", "");
    for (const claim of list(f(verdict, "claims", []))) {
      const v = String(f(claim, "verdict", "")).replace(/^VERDICT_/, "");
      if (v !== "CONFIRMED" && v !== "BEST") {
        return `${f(claim, "field", "")} ${v}: ${f(claim, "reason", "") || `claimed ${f(claim, "claimed", "")}, the referee says ${f(claim, "expected", "")}`}`;
      }
    }
    return list(f(verdict, "claims", [])).length ? "" : "no claim";
  }

  function showList() {
    const wanted = $("disputes-filter").value;
    const table = $("disputes-list");
    table.textContent = "";
    const head = table.insertRow();
    for (const name of ["case", "outcome", "why"]) { const th = document.createElement("th"); th.textContent = name; head.appendChild(th); }
    let shown = 0, matching = 0;
    batch.verdicts.forEach((verdict, index) => {
      const outcome = outcomeOf(verdict);
      if (wanted === "" ? outcome === "CONFIRMED" : wanted !== "*" && outcome !== wanted) return;
      matching++;
      if (shown >= LISTED) return;
      shown++;
      const row = table.insertRow();
      row.className = "case";
      row.dataset.outcome = outcome;
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = String(f(verdict, "id", `case ${index + 1}`));
      button.addEventListener("click", () => showCase(index));
      row.insertCell().appendChild(button);
      const pill = document.createElement("span");
      pill.className = `outcome ${outcome}`;
      pill.textContent = outcome;
      row.insertCell().appendChild(pill);
      row.insertCell().textContent = why(verdict);
    });
    if (matching > shown) {
      const row = table.insertRow();
      const cell = row.insertCell();
      cell.colSpan = 3;
      cell.className = "note";
      cell.textContent = `${matching - shown} more: the download holds every verdict.`;
    }
  }

  function leftOut(cards, groups) {
    const left = cards.map(canon);
    for (const g of groups) for (const c of g) { const i = left.indexOf(canon(c)); if (i < 0) return []; left.splice(i, 1); }
    return left;
  }

  function claimedDrawings(item) {
    const value = item.value || {};
    const hand = f(value, "hand");
    if (hand) {
      const groups = list(f(hand, "claimed_groups", [])).map((g) => list(f(g, "cards", [])));
      if (groups.length) return [claimedDrawing(groups, leftOut(list(f(hand, "cards", [])), groups), "The claimed linking")];
      const points = f(hand, "claimed_points");
      return points == null ? [] : [cardsDrawing(list(f(hand, "cards", [])), "The hand", `claimed: ${points} points`)];
    }
    const close = f(value, "close");
    if (close) {
      const said = [];
      if (f(close, "claimed_kind") != null) said.push(kindName(f(close, "claimed_kind")) || "no valid close");
      if (f(close, "claimed_multiplier") != null) said.push(`×${f(close, "claimed_multiplier")}`);
      return [cardsDrawing(list(f(close, "cards", [])), "The close as sent", said.length ? `claimed: ${said.join(" ")}` : "", f(close, "discard"))];
    }
    const deal = f(value, "deal");
    if (deal) {
      const players = list(f(f(deal, "deal", {}), "players", []));
      return list(f(f(deal, "claims", {}), "players", [])).flatMap((claim) => {
        const groups = list(f(claim, "groups", [])).map((g) => list(f(g, "cards", [])));
        const seat = Number(f(claim, "player", 0));
        if (!groups.length || !players[seat]) return [];
        const name = f(players[seat], "name", "") || `player${seat + 1}`;
        return [claimedDrawing(groups, leftOut(list(f(players[seat], "cards", [])), groups), `${name}: the claimed linking`)];
      });
    }
    return [];
  }

  function answerDrawings(verdict) {
    if (f(verdict, "hand")) return [linkingDrawing(f(verdict, "hand"), "The best linking")];
    if (f(verdict, "close")) return [closeDrawing(f(verdict, "close"), "The close")];
    if (f(verdict, "deal")) return [dealDrawing(f(verdict, "deal"), "The deal scored")];
    const record = f(verdict, "record");
    if (record) {
      const violation = f(record, "violation");
      const out = [replayDrawing(record, violation ? `Turn ${f(violation, "turn", 0)}: the first violation` : `Deal after turn ${f(record, "turns_played", 0)}`)];
      if (f(record, "complete", false) && f(record, "result")) out.push(dealDrawing(f(record, "result"), "The deal scored"));
      return out;
    }
    return [];
  }

  function showCase(index) {
    const verdict = batch.verdicts[index], item = batch.cases[index];
    const outcome = outcomeOf(verdict);
    const error = f(verdict, "error");
    let out = `<h3 id="case-title">${esc(f(verdict, "id", ""))} <span class="outcome ${esc(outcome)}">${esc(outcome)}</span> ` +
      `<small class="note">line ${item.line}</small></h3>`;
    if (error && (f(error, "field") || f(error, "message"))) {
      out += `<p class="error">${esc(sentence(`${fieldWords(f(error, "field", ""))}${f(error, "value") ? ` (${f(error, "value")})` : ""}: ${f(error, "message", "")}`))}</p>`;
    }
    out += claimsTable(f(verdict, "claims", []));
    if (outcome !== "MALFORMED") {
      const claimed = claimedDrawings(item), answer = answerDrawings(verdict);
      if (claimed.length) out += `<h4>Claimed</h4>${claimed.join("")}`;
      if (answer.length) out += `<h4>The referee</h4>${answer.join("")}`;
    }
    $("disputes-case").innerHTML = out;
    $("disputes-case").scrollIntoView({ block: "nearest" });
  }

  for (const name of OUTCOMES) {
    const option = document.createElement("option");
    option.value = name;
    option.textContent = name;
    $("disputes-filter").appendChild(option);
  }
  $("disputes-filter").addEventListener("change", showList);
  $("disputes-stop").addEventListener("click", () => { batch.stop = true; });

  $("disputes-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const file = $("disputes-file").files[0];
    clearErrors("disputes");
    if (!file) { $("disputes-file-error").textContent = "Choose a file of cases first."; return; }
    busy($("disputes-judge"), async () => {
      const text = await file.text();
      batch.name = file.name.replace(/\.[^.]*$/, "") || "disputes";
      batch.cases = readCases(text);
      batch.verdicts = [];
      batch.counts = {};
      batch.stop = false;
      $("disputes-case").innerHTML = "";
      $("disputes-download").disabled = true;
      $("disputes-stop").disabled = false;
      document.body.dataset.disputes = "running";
      const progress = $("disputes-progress");
      progress.max = Math.max(1, batch.cases.length);
      progress.value = 0;
      countsTable();
      showList();
      if (!batch.cases.length) $("disputes-file-error").textContent = "The file holds no case (one JSON object per line).";
      const started = performance.now();
      try {
        for (const part of chunks(batch.cases)) {
          if (batch.stop) break;
          const verdicts = await judge(part);
          for (const verdict of verdicts) {
            batch.verdicts.push(verdict);
            const outcome = outcomeOf(verdict);
            batch.counts[outcome] = (batch.counts[outcome] || 0) + 1;
          }
          progress.value = batch.verdicts.length;
          $("disputes-status").textContent = `${batch.verdicts.length} of ${batch.cases.length} cases judged`;
          countsTable();
        }
        const seconds = ((performance.now() - started) / 1000).toFixed(1);
        $("disputes-status").textContent = `${batch.verdicts.length} of ${batch.cases.length} cases judged in ${seconds} s` +
          (batch.stop && batch.verdicts.length < batch.cases.length ? " (stopped)" : "");
      } catch (error) {
        showError("disputes", error);
      } finally {
        $("disputes-stop").disabled = true;
        $("disputes-download").disabled = !batch.verdicts.length;
        showList();
        document.body.dataset.disputes = "done";
      }
    });
  });

  $("disputes-download").addEventListener("click", () => {
    const lines = batch.verdicts.map((v) => JSON.stringify(v)).join("\n") + "\n";
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([lines], { type: "application/x-ndjson" }));
    link.download = `${batch.name}.verdicts.jsonl`;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  });

  document.body.dataset.ready = "yes";
})();
