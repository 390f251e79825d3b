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
  // The card picker's faces are the page's symbols (referee.render.card_symbols), their size the
  // symbols' own; every drawing of an answer is the referee's (DrawAnswer): none is made here.
  const [, , CW, CH] = document.querySelector("#symbols symbol").getAttribute("viewBox").split(" ").map(Number);
  const FONTS = document.querySelector("#symbols svg").getAttribute("font-family");
  const SUITS = { "♣": "C", "♦": "D", "♥": "H", "♠": "S" };
  const PRETTY = { C: "♣", D: "♦", H: "♥", S: "♠" };

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

  /** The pictures of an answer, drawn by the referee: each an SVG document, with its caption
   * when ``captions`` (a dispute's "Claimed" and "The referee"). */
  async function drawn(question, captions = false) {
    let reply;
    try { reply = await call("/v1/answers:draw", question); } catch (error) {
      // The question's fields are named under its own name ("solve_hand.cards[1]"): the panel's
      // fields are the question's, so the sentence names them as the question's method would.
      const [key] = Object.keys(question);
      for (const v of (error.violations || [])) {
        if (!v.field.startsWith(`${key}.`)) continue;
        v.field = v.field.slice(key.length + 1);
        v.sentence = sentence(`${fieldWords(v.field)}: ${v.description}`);
      }
      if (error.violations && error.violations.length) error.message = error.violations[0].sentence;
      throw error;
    }
    return list(f(reply, "drawings", [])).map((d) =>
      captions ? `<h4>${esc(f(d, "caption", ""))}</h4>${f(d, "svg", "")}` : f(d, "svg", "")).join("");
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
      description: String(v.description || ""),
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
        $("hand-out").innerHTML = await drawn({ solve_hand: { cards: codes($("hand-cards").value) } });
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
        const [reply, pictures] = await Promise.all([call("/v1/closes:check", body), drawn({ check_close: body })]);
        $("close-out").innerHTML = pictures + claimsTable(reply.claims);
      } catch (error) {
        showError("close", error, (top) => ({ cards: "close-cards", discard: "close-discard", claimed_kind: "close-kind",
          claimed_multiplier: "close-multiplier" })[top]);
      }
    });
  });

  // The deal or record, stepped through ------------------------------------------------------

  // A record is kept as the request it came in (its JSON, or its notation as text); the referee
  // plays its first k turns (stop_after_turn), so either is stepped through the same way.
  const stepping = { request: null, total: 0, last: 0, replies: new Map(), at: 0 };

  async function replayAt(k) {
    if (stepping.replies.has(k)) return stepping.replies.get(k);
    const reply = await call("/v1/deals:replay", { ...stepping.request, stop_after_turn: k });
    stepping.replies.set(k, reply);
    return reply;
  }

  const cardsOf = (hand) => list(f(hand, "cards", [])).map(canon);
  function without(cards, taken) {
    const left = [...cards];
    for (const card of taken) { const i = left.indexOf(card); if (i >= 0) left.splice(i, 1); }
    return left;
  }

  /** Turn k in words, read from the referee's state before it and after it: who played (by the
   * seat's name), where the card came from, and what was thrown or laid down. */
  function turnWords(before, after, k) {
    const seat = f(before, "to_play");
    const names = list(f(before, "hands", [])).map((h) => f(h, "name", ""));
    const who = seat == null ? "The player to play" : names[seat] || `Seat ${seat}`;
    const closed = f(after, "complete", false) && f(after, "closer") === seat;
    const pile = list(f(f(after, "discard_pile", {}), "cards", []));
    const thrown = closed ? f(after, "discard", "") : pile[pile.length - 1] || "";
    const held = seat == null ? [] : cardsOf(list(f(before, "hands", []))[seat]);
    const now = seat == null ? [] : cardsOf(list(f(after, "hands", []))[seat]);
    const [drawn] = without([...now, canon(thrown)], held);
    const stockBefore = list(f(f(before, "stock", {}), "cards", [])).length;
    const stockAfter = list(f(f(after, "stock", {}), "cards", [])).length;
    const fromStock = stockAfter < stockBefore || f(after, "reshuffles", 0) > f(before, "reshuffles", 0);
    const from = fromStock ? "the stock" : "the discard pile";
    const action = closed ? `closes, laying ${pretty(thrown)} face down` : `throws ${pretty(thrown)}`;
    return `Turn ${k}: ${who} draws from ${from}${drawn ? ` (${pretty(drawn)})` : ""} and ${action}.`;
  }

  async function showStep(k) {
    k = Math.max(0, Math.min(stepping.last, k));
    clearErrors("deal");
    let reply, before, pictures;
    try {
      [reply, before, pictures] = await Promise.all([
        replayAt(k), k ? replayAt(k - 1) : null, drawn({ replay_deal: { ...stepping.request, stop_after_turn: k } }),
      ]);
    } catch (error) { showError("deal", error, () => "deal-json"); return; }
    stepping.at = k;
    $("step-turn").value = String(k);
    const violation = f(reply, "violation");
    $("step-label").textContent = `turn ${k} of ${stepping.total}` + (violation ? ": the first violation" : "");
    $("step-turn-text").textContent = violation ? f(violation, "message", "")
      : k ? turnWords(before, reply, k) : "The deal as dealt, before the first turn.";
    $("deal-out").innerHTML = pictures + (f(reply, "complete", false) ? claimsTable(f(reply, "claims", [])) : "");
    $("step-first").disabled = $("step-prev").disabled = k === 0;
    $("step-next").disabled = $("step-last").disabled = k === stepping.last;
  }

  $("step-first").addEventListener("click", () => showStep(0));
  $("step-prev").addEventListener("click", () => showStep(stepping.at - 1));
  $("step-next").addEventListener("click", () => showStep(stepping.at + 1));
  $("step-last").addEventListener("click", () => showStep(stepping.last));
  $("step-turn").addEventListener("change", () => showStep(Number($("step-turn").value)));

  $("deal-review").addEventListener("click", () => {
    busy($("deal-review"), async () => {
      clearErrors("deal");
      const { record, rules, notation } = stepping.request || {};
      const question = notation ? { notation, rules } : { record, rules };
      try {
        $("review-out").innerHTML = await drawn({ review_deal: question });
      } catch (error) { showError("deal", error, () => "deal-json"); }
    });
  });

  /** The pasted text as a request: JSON (a ScoreDealRequest, Deal, ReplayDealRequest or
   * DealRecord), or else a record in the notation. */
  function pasted(text) {
    if (!/^\s*\{/.test(text)) return { record: { notation: text } };  // tags open with "[": not JSON
    let value;
    try { value = JSON.parse(text); } catch (error) { return { error: sentence(`This is not JSON: ${error.message}`) }; }
    const object = value && typeof value === "object" && !Array.isArray(value) ? value : {};
    if ("record" in object || "notation" in object) return { record: object };
    if ("seats" in object && "turns" in object) return { record: { record: object } };
    if ("deal" in object) return { deal: object };
    if ("players" in object) return { deal: { deal: object } };
    return { error: "Paste a record in the notation, a ReplayDealRequest (with “record”) or DealRecord (with “seats” " +
      "and “turns”), or a ScoreDealRequest (with “deal”) or Deal (with “players”)." };
  }

  $("deal-form").addEventListener("submit", (event) => {
    event.preventDefault();
    busy($("deal-go"), async () => {
      clearErrors("deal");
      $("deal-out").innerHTML = $("review-out").innerHTML = "";
      $("steps").hidden = $("deal-review").hidden = true;
      const read = pasted($("deal-json").value);
      if (read.error) {
        $("deal-json-error").textContent = read.error;
        $("deal-json").setAttribute("aria-invalid", "true");
        return;
      }
      const fields = (top) => (top ? "deal-json" : null);
      try {
        if (read.record) {
          const request = read.record;
          if (!request.notation && (!request.record || typeof request.record !== "object")) request.record = {};
          stepping.request = request;
          stepping.replies = new Map();
          const whole = await call("/v1/deals:replay", request);
          stepping.total = Number(f(whole, "turns_played", 0)) + (f(whole, "violation") ? 1 : 0);
          if (!request.notation) stepping.total = list(f(request.record, "turns", [])).length;
          const violation = f(whole, "violation");
          stepping.last = violation ? Math.min(stepping.total, Number(f(violation, "turn", 0))) : stepping.total;
          stepping.replies.set(stepping.last, whole);
          $("step-turn").max = String(stepping.last);
          $("steps").hidden = false;
          $("deal-review").hidden = false;
          await showStep(stepping.last);
        } else {
          const [reply, pictures] = await Promise.all([call("/v1/deals:score", read.deal), drawn({ score_deal: read.deal })]);
          $("deal-out").innerHTML = pictures + claimsTable(reply.claims);
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

  async function showCase(index) {
    const verdict = batch.verdicts[index], item = batch.cases[index];
    const outcome = outcomeOf(verdict);
    const error = f(verdict, "error");
    let out = `<h3 id="case-title">${esc(f(verdict, "id", ""))} <span class="outcome ${esc(outcome)}">${esc(outcome)}</span> ` +
      `<small class="note">line ${item.line}</small></h3>`;
    if (error && (f(error, "field") || f(error, "message"))) {
      out += `<p class="error">${esc(sentence(`${fieldWords(f(error, "field", ""))}${f(error, "value") ? ` (${f(error, "value")})` : ""}: ${f(error, "message", "")}`))}</p>`;
    }
    out += claimsTable(f(verdict, "claims", []));
    $("disputes-case").innerHTML = out;
    if (outcome !== "MALFORMED" && item.value) {
      // The case drawn by the referee, as the dispute report draws it: what was claimed beside its answer.
      try { out += await drawn({ dispute: item.value }, true); } catch (error) { out += `<p class="error">${esc(error.message)}</p>`; }
      $("disputes-case").innerHTML = out;
    }
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
