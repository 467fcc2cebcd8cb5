// gputui's web page: the hub's event stream (docs/SERVE.md) drawn as the fleet's problems, its
// hosts and GPUs with their holders, and who uses what. Plain ES2020, no framework, no build step.
//
// Safety: the page is served with `default-src 'self'`: no inline script or style. Every text that
// comes from a host reaches the DOM through textContent (never as markup), with control and
// invisible characters shown as escapes by the terminal's rule (gputui/probe/wire.py `printable`).
"use strict";

(() => {
  const EVENTS = "/api/v1/events";
  const TOKEN_KEY = "gputui.token";
  const HISTORY = 60; // points of a sparkline (the hub's own history holds as many)
  const BACKOFF_MIN = 500; // ms before reconnecting, doubled up to BACKOFF_MAX while it keeps failing
  const BACKOFF_MAX = 10000;
  const PROBLEMS_SHOWN = 100; // problems listed before "and N more"
  const IDLE_SLACK = 32 * 2 ** 20; // memory within this of the idle figure is nothing held
  const SEVERE = ["error", "ecc"];

  // -- text ------------------------------------------------------------------------------------
  // The one escaping rule for untrusted text: control characters and invisible reordering or
  // zero-width characters as escapes (\e, \n, \x07, \u202e), as the terminal shows them.
  const UNSAFE = /[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2069\ufeff]/g;
  const NAMED = { "\t": "\\t", "\n": "\\n", "\r": "\\r", "\x1b": "\\e" };
  function printable(value) {
    const text = value === null || value === undefined ? "" : String(value);
    return text.replace(UNSAFE, (ch) => {
      const code = ch.charCodeAt(0);
      if (code > 0xff) return "\\u" + code.toString(16).padStart(4, "0");
      return NAMED[ch] || "\\x" + code.toString(16).padStart(2, "0");
    });
  }

  /** An element with a class and (escaped) text; children appended. Never markup from data. */
  function el(tag, cls, text, ...children) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = printable(text);
    for (const child of children) if (child) node.appendChild(child);
    return node;
  }

  // A command line as people say it (gputui/probe/common.py `brief_command`, the dashboard's rule):
  // the program's base name, absolute paths longer than 32 characters cut to ".../name"
  // (`/opt/venv/bin/python -S /tmp/x/bin/train.py` -> `python -S .../train.py`).
  const PATH_ROOM = 32;
  const baseName = (path) => path.slice(path.lastIndexOf("/") + 1);
  function briefCommand(command) {
    if (!Array.isArray(command) || !command.length) return "";
    const words = command.map(String);
    const out = [baseName(words[0]) || words[0]];
    for (const arg of words.slice(1)) {
      out.push(arg.startsWith("/") && arg.length > PATH_ROOM && baseName(arg) ? ".../" + baseName(arg) : arg);
    }
    return out.join(" ");
  }
  /** The whole of an untrusted text as a tooltip: a property, never markup; escaped as shown. */
  function titled(node, text) {
    node.title = printable(text);
    return node;
  }

  const GIB = 2 ** 30;
  function bytes(n) {
    if (n === null || n === undefined) return "–";
    if (n >= 100 * GIB) return (n / GIB).toFixed(0) + " GiB";
    if (n >= GIB) return (n / GIB).toFixed(1) + " GiB";
    return (n / 2 ** 20).toFixed(0) + " MiB";
  }
  const num = (v) => typeof v === "number" && isFinite(v);
  const pct = (v) => (num(v) ? Math.round(v) + " %" : "–");

  // -- delta samples (gputui/probe/delta.py `apply`, the same rules) -----------------------------
  class DeltaError extends Error {}
  const MERGED = ["gpus", "processes", "delta", "gone"];
  const isInt = (v) => Number.isInteger(v);
  const gpuKey = (r) => (r && typeof r === "object" && isInt(r.index) ? String(r.index) : null);
  function procKey(r) {
    if (!r || typeof r !== "object" || !isInt(r.pid)) return null;
    const start = r.start_time === undefined ? null : r.start_time;
    if (start !== null && !isInt(start)) return null;
    return r.pid + "/" + start;
  }
  function changes(name, list) {
    if (list === null || list === undefined) return new Map();
    if (!Array.isArray(list)) throw new DeltaError(name + " must be a list");
    const keyOf = name === "gpus" ? gpuKey : procKey;
    const out = new Map();
    for (const change of list) {
      const key = keyOf(change);
      if (key === null) throw new DeltaError("a record without a usable key");
      if (out.has(key)) throw new DeltaError(name + ": one record twice in a delta");
      out.set(key, change);
    }
    return out;
  }
  function goneKeys(gone, name) {
    const value = gone[name] === undefined ? [] : gone[name];
    if (!Array.isArray(value)) throw new DeltaError("gone." + name + " must be a list");
    const keys = new Set();
    for (const item of value) {
      let key = null;
      if (name === "gpus") key = isInt(item) ? String(item) : null;
      else if (Array.isArray(item) && item.length === 2) key = procKey({ pid: item[0], start_time: item[1] });
      if (key === null) throw new DeltaError("gone." + name + " holds a bad key");
      keys.add(key);
    }
    return keys;
  }
  function mergeList(name, base, changed, gone) {
    if (!Array.isArray(base)) base = [];
    if (!changed.size && !gone.size) return base;
    const keyOf = name === "gpus" ? gpuKey : procKey;
    const merged = [];
    const held = new Set();
    for (const record of base) {
      const key = keyOf(record);
      held.add(key);
      if (gone.has(key)) continue;
      const change = changed.get(key);
      merged.push(change === undefined ? record : Object.assign({}, record, change));
    }
    for (const [key, change] of changed) if (!held.has(key)) merged.push(change);
    return merged;
  }
  /** Sample `base` with `delta` merged in; DeltaError when it follows another sample or is malformed. */
  function applyDelta(base, delta) {
    if (!isInt(delta.delta)) throw new DeltaError("delta must be the seq of the sample it follows");
    if (delta.delta !== base.seq) throw new DeltaError("a delta for another sample than the one held");
    const gone = delta.gone === undefined ? {} : delta.gone;
    if (gone === null || typeof gone !== "object" || Array.isArray(gone)) throw new DeltaError("gone must be an object");
    const gpus = changes("gpus", delta.gpus);
    const procs = changes("processes", delta.processes);
    const merged = Object.assign({}, base);
    for (const [k, v] of Object.entries(delta)) if (!MERGED.includes(k)) merged[k] = v;
    merged.gpus = mergeList("gpus", base.gpus, gpus, goneKeys(gone, "gpus"));
    merged.processes = mergeList("processes", base.processes, procs, goneKeys(gone, "processes"));
    return merged;
  }

  // -- the fleet as the stream tells it -----------------------------------------------------------
  const state = {
    hub: null,
    hosts: new Map(), // name -> host
    order: [],
    problems: [],
    problemStates: new Map(), // "host/gpu" (gpu "" for the host's own) -> Set of states
    actions: [], // the last plans' starts and verdicts, {host, record}, oldest first
    query: GputuiFilter.parse(""),
    connection: "connecting",
  };

  function newHost(name) {
    return { name, status: "connecting", reason: null, message: null, group: "", read_only: false,
      hello: null, sample: null, history: new Map(), idleSince: new Map(), node: null, matched: true };
  }
  function host(name) {
    let h = state.hosts.get(name);
    if (h === undefined) {
      h = newHost(name);
      state.hosts.set(name, h);
      state.order.push(name);
      view.orderChanged = true;
    }
    return h;
  }
  function dropEverything() {
    state.hub = null;
    state.hosts.clear();
    state.order = [];
    state.problems = [];
    state.problemStates = new Map();
    state.actions = [];
    view.everything = view.actions = true;
  }

  function onHub(record) {
    dropEverything();
    state.hub = record;
    for (const name of record.hosts || []) host(String(name));
    backoff = BACKOFF_MIN;
    setConnection("live");
  }
  function onHost([name, record]) {
    const h = host(name);
    for (const field of ["status", "reason", "message", "group", "read_only"]) {
      if (field in record) h[field] = record[field];
    }
    if (record.history && typeof record.history === "object") {
      h.history = new Map();
      for (const [index, points] of Object.entries(record.history)) {
        h.history.set(String(index), {
          util: (points.util || []).slice(-HISTORY),
          memory: (points.memory || []).slice(-HISTORY),
          last: (points.time || []).slice(-1)[0] || 0,
        });
      }
    }
    touch(h);
  }
  function onHello([name, record]) {
    const h = host(name);
    h.hello = record;
    touch(h);
  }
  function onSample([name, record]) {
    const h = host(name);
    let sample = record;
    if (record.delta !== undefined && record.delta !== null) {
      if (h.sample === null) throw new DeltaError("a delta before any whole sample");
      sample = applyDelta(h.sample, record);
    }
    h.sample = sample;
    remember(h, sample);
    touch(h);
  }
  function onProblems(list) {
    state.problems = Array.isArray(list) ? list : [];
    const states = new Map();
    for (const p of state.problems) {
      const key = p.host + "/" + (p.gpu === null || p.gpu === undefined ? "" : p.gpu);
      if (!states.has(key)) states.set(key, new Set());
      states.get(key).add(p.state);
    }
    // A host whose problems changed is matched anew by the filter.
    for (const key of new Set([...state.problemStates.keys(), ...states.keys()])) {
      const h = state.hosts.get(key.slice(0, key.lastIndexOf("/")));
      if (h) touch(h);
    }
    state.problemStates = states;
    view.problems = true;
  }

  /** A plan's progress: its start and its verdicts are kept for the actions strip (the other
   * stages are the plan's working steps: the dashboard's action log shows those). */
  const ACTION_STAGES = ["accepted", "verdict", "done"];
  const ACTIONS_KEPT = 20;
  function onEvent([name, record]) {
    if (!record || typeof record !== "object" || !ACTION_STAGES.includes(record.stage)) return;
    state.actions.push({ host: name, record });
    if (state.actions.length > ACTIONS_KEPT) state.actions.shift();
    view.actions = true;
  }

  /** A sample's readings into the sparklines, and the idle streaks of its holders. */
  function remember(h, sample) {
    const time = sample.time || 0;
    for (const gpu of sample.gpus || []) {
      const key = String(gpu.index);
      let points = h.history.get(key);
      if (!points) h.history.set(key, (points = { util: [], memory: [], last: 0 }));
      if (time <= points.last) continue; // already in the hub's history
      points.last = time;
      points.util.push(num(gpu.util_gpu) ? gpu.util_gpu : 0);
      points.memory.push(num(gpu.memory_used) && gpu.memory_total ? (100 * gpu.memory_used) / gpu.memory_total : 0);
      if (points.util.length > HISTORY) points.util.shift();
      if (points.memory.length > HISTORY) points.memory.shift();
    }
    // Idle holders as the page sees them: a process NVML lists with memory, at 0 % SM on every GPU
    // it holds (its own figure, else the GPU's), since the first such sample the page saw.
    const gpus = new Map((sample.gpus || []).map((g) => [String(g.index), g]));
    const seen = new Map();
    for (const p of sample.processes || []) {
      if (p.kind !== "user" || p.state === "Z" || !p.gpu_memory || !Object.keys(p.gpu_memory).length) continue;
      const evidence = Object.keys(p.gpu_memory).map((i) => {
        const own = p.gpu_util && p.gpu_util[i] ? p.gpu_util[i].sm : null;
        return num(own) ? own : gpus.has(i) ? gpus.get(i).util_gpu : null;
      });
      if (evidence.every((v) => v === 0)) {
        const key = procKey(p);
        seen.set(key, h.idleSince.has(key) ? h.idleSince.get(key) : time);
      }
    }
    h.idleSince = seen;
  }

  // -- what the filter matches (gputui/views/problems.py's subjects) ------------------------------
  const procs = (h) => (h.sample && h.sample.processes) || [];
  const procGpus = (p) => (Array.isArray(p.gpus) ? p.gpus : []);
  const idleOf = (h, p) => {
    const since = h.idleSince.get(procKey(p));
    return since === undefined || !h.sample ? null : Math.max(0, (h.sample.time || 0) - since);
  };
  function hostStates(h) {
    const out = new Set([h.status]);
    for (const s of state.problemStates.get(h.name + "/") || []) out.add(s);
    if (h.hello && h.hello.error && h.hello.error.code) out.add("no-gpu");
    return out;
  }
  function gpuFree(h, gpu) {
    if (gpu.error || !num(gpu.memory_used)) return false;
    if (procs(h).some((p) => procGpus(p).includes(gpu.index) && ["user", "ghost", "hidden"].includes(p.kind))) return false;
    const base = num(gpu.memory_baseline) ? gpu.memory_baseline : 0;
    const states = state.problemStates.get(h.name + "/" + gpu.index) || new Set();
    return gpu.memory_used <= base + IDLE_SLACK && !SEVERE.some((s) => states.has(s));
  }
  function rowsSubject(h, states, list, extra) {
    return Object.assign(
      {
        host: h.name, group: h.group || "", states: [...states],
        users: [...new Set(list.filter((p) => p.user).map((p) => String(p.user)))],
        uids: list.filter((p) => isInt(p.uid)).map((p) => p.uid),
        kinds: [...new Set(list.map((p) => p.kind))],
        commands: list.filter((p) => Array.isArray(p.command) && p.command.length).map((p) => p.command.join(" ")),
        pids: list.map((p) => p.pid),
        jobs: list.filter((p) => p.job).map((p) => String(p.job)),
        containers: list.filter((p) => p.container).map((p) => String(p.container)),
        words: list.filter((p) => p.name).map((p) => String(p.name)),
        util: null, temp: null,
      },
      extra,
    );
  }
  function gpuSubject(h, gpu) {
    const list = procs(h).filter((p) => procGpus(p).includes(gpu.index));
    const own = state.problemStates.get(h.name + "/" + gpu.index) || new Set();
    const states = new Set([...hostStates(h), ...own]);
    if (h.status === "live" && h.sample) states.add(gpuFree(h, gpu) ? "free" : "busy");
    states.add(hasProblem(h, gpu) ? "problem" : "healthy");
    const idle = list.map((p) => idleOf(h, p)).filter((v) => v !== null);
    return rowsSubject(h, states, list, {
      gpus: [gpu.index], uuids: gpu.uuid ? [String(gpu.uuid)] : [], models: gpu.name ? [String(gpu.name)] : [],
      memory: num(gpu.memory_used) ? gpu.memory_used : null, memory_total: num(gpu.memory_total) ? gpu.memory_total : null,
      idle: idle.length ? Math.max(...idle) : null, util: num(gpu.util_gpu) ? gpu.util_gpu : null,
      temp: num(gpu.temperature) ? gpu.temperature : null,
    });
  }
  const hasProblem = (h, gpu) =>
    (state.problemStates.get(h.name + "/") || new Set()).size > 0 ||
    (state.problemStates.get(h.name + "/" + gpu.index) || new Set()).size > 0;
  function hostSubject(h) {
    const gpus = (h.sample && h.sample.gpus) || [];
    const states = hostStates(h);
    let troubled = (state.problemStates.get(h.name + "/") || new Set()).size > 0;
    for (const g of gpus) {
      for (const s of state.problemStates.get(h.name + "/" + g.index) || []) {
        states.add(s);
        troubled = true;
      }
    }
    states.add(troubled ? "problem" : "healthy");
    const used = gpus.filter((g) => num(g.memory_used)).map((g) => g.memory_used);
    const total = gpus.filter((g) => num(g.memory_total)).map((g) => g.memory_total);
    const idle = procs(h).map((p) => idleOf(h, p)).filter((v) => v !== null);
    return rowsSubject(h, states, procs(h), {
      gpus: gpus.map((g) => g.index), uuids: gpus.filter((g) => g.uuid).map((g) => String(g.uuid)),
      models: [...new Set(gpus.filter((g) => g.name).map((g) => String(g.name)))],
      memory: used.length ? used.reduce((a, b) => a + b, 0) : null,
      memory_total: total.length ? total.reduce((a, b) => a + b, 0) : null,
      idle: idle.length ? Math.max(...idle) : null,
    });
  }
  function procSubject(h, p, index) {
    const states = hostStates(h);
    const idle = idleOf(h, p);
    const idleAfter = ((state.hub && state.hub.idle_minutes) || 10) * 60;
    if (idle !== null && idle >= idleAfter) states.add("idle-held");
    const held = p.gpu_memory && Object.keys(p.gpu_memory).length ? p.gpu_memory : null;
    const memory = held === null ? null : index === null ? Object.values(held).reduce((a, b) => a + (b || 0), 0) : held[index];
    const share = p.gpu_util && index !== null ? p.gpu_util[index] : null;
    return {
      host: h.name, group: h.group || "", states: [...states], users: p.user ? [String(p.user)] : [],
      uids: isInt(p.uid) ? [p.uid] : [], kinds: [p.kind], gpus: procGpus(p),
      uuids: ((h.sample && h.sample.gpus) || []).filter((g) => procGpus(p).includes(g.index) && g.uuid).map((g) => String(g.uuid)),
      models: [], commands: Array.isArray(p.command) && p.command.length ? [p.command.join(" ")] : [],
      pids: [p.pid], jobs: p.job ? [String(p.job)] : [], containers: p.container ? [String(p.container)] : [],
      memory: num(memory) ? memory : null, memory_total: null,
      util: share && num(share.sm) ? share.sm : null, temp: null, idle, words: p.name ? [String(p.name)] : [],
    };
  }

  // -- drawing: batched per animation frame, only the cards that changed and can be seen ----------
  // At a thousand hosts every card changes every second: building them all would hold the main
  // thread for the whole second. A card keeps its element for the page's life; its contents are
  // built when its host changed AND it is on (or near) the screen (an IntersectionObserver says
  // which), else when it scrolls into view. Whether a card matches the filter is computed for every
  // changed host (no DOM: the list's layout and count depend on it), within a time budget a frame,
  // so that typing in the filter box answers in the next frame however large the fleet.
  const MATCH_BUDGET = 8; // ms of filter matching a frame; what is left waits for the next frame
  const DRAW_BUDGET = 12; // ms of building cards a frame (the cards on screen come first)
  const SLOW_EVERY = 1000; // ms between redraws of what sums the whole fleet (users, the count)
  const view = {
    dirty: new Set(), // hosts whose card is out of date
    unmatched: new Set(), // hosts whose match against the filter is out of date
    near: new Set(), // hosts whose card is on or near the screen
    everything: true, problems: true, actions: true, orderChanged: true, requeried: false, slowAt: -Infinity, slowDue: true,
    slowTimer: 0, scheduled: false, observer: null,
  };
  const $ = (id) => document.getElementById(id);

  function touch(h) {
    view.dirty.add(h.name);
    if (!state.query.empty) view.unmatched.add(h.name);
    view.slowDue = true;
    schedule();
  }
  function schedule() {
    if (view.scheduled) return;
    view.scheduled = true;
    requestAnimationFrame(draw);
  }
  function draw() {
    view.scheduled = false;
    if (view.everything) startOver();
    if (view.orderChanged) placeCards();
    matchSome(performance.now() + MATCH_BUDGET);
    const drawn = drawSome(performance.now() + DRAW_BUDGET);
    if (view.problems) drawProblems();
    if (view.actions) drawActions();
    drawSlow();
    view.everything = view.problems = view.orderChanged = view.actions = false;
    if (view.unmatched.size || !drawn) schedule();
  }
  /** What sums the whole fleet: at once when a new filter has been matched through, else at most
   * once a second while hosts stream. */
  function drawSlow() {
    if (view.unmatched.size || !view.slowDue) return;
    const wait = view.requeried ? 0 : view.slowAt + SLOW_EVERY - performance.now();
    if (wait > 0) {
      if (!view.slowTimer) view.slowTimer = setTimeout(() => ((view.slowTimer = 0), schedule()), wait);
      return;
    }
    drawUsers();
    drawCounts();
    view.slowAt = performance.now();
    view.slowDue = view.requeried = false;
  }
  /** A whole new state (the hub said hello again): every card made anew. */
  function startOver() {
    if (view.observer) view.observer.disconnect();
    view.observer = new IntersectionObserver(onSeen, { rootMargin: "100% 0px" });
    view.near.clear();
    $("host-list").replaceChildren();
    view.orderChanged = true;
    view.slowDue = true;
  }
  /** Cards come into view (drawn in the next frame if out of date) or leave it. */
  function onSeen(entries) {
    for (const entry of entries) {
      const name = entry.target.dataset.host;
      if (entry.isIntersecting) view.near.add(name);
      else view.near.delete(name);
    }
    schedule();
  }
  /** The out-of-date cards on or near the screen, those on it first, until `deadline`; false when
   * some are left for the next frame. */
  function drawSome(deadline) {
    const bottom = window.innerHeight;
    const waiting = [...view.near].filter((name) => view.dirty.has(name) && state.hosts.has(name));
    const onScreen = (name) => {
      const box = state.hosts.get(name).node.getBoundingClientRect();
      return box.bottom >= 0 && box.top <= bottom;
    };
    if (waiting.length > 1) waiting.sort((a, b) => onScreen(b) - onScreen(a));
    for (const name of waiting) {
      if (performance.now() >= deadline) return false;
      drawHost(state.hosts.get(name));
    }
    return true;
  }
  function placeCards() {
    const frag = document.createDocumentFragment();
    for (const name of state.order) {
      const h = state.hosts.get(name);
      if (!h) continue;
      if (!h.node) {
        h.node = el("article", "host", null, el("header", "host-head", null, el("h3", "host-name", h.name)));
        h.node.dataset.host = h.name;
        h.node.hidden = !h.matched;
        view.observer.observe(h.node);
      }
      frag.appendChild(h.node);
    }
    $("host-list").replaceChildren(frag);
  }
  /** The filter against the hosts whose data or the filter changed, until `deadline`. */
  function matchSome(deadline) {
    for (const name of view.unmatched) {
      const h = state.hosts.get(name);
      view.unmatched.delete(name);
      if (!h) continue;
      const matched = matchesHost(h);
      if (matched !== h.matched) {
        h.matched = matched;
        view.dirty.add(name);
        view.slowDue = true;
      }
      if (h.node) h.node.hidden = !matched;
      if (performance.now() >= deadline) return;
    }
  }
  function matchesHost(h) {
    const q = state.query;
    if (q.empty) return true;
    const gpus = (h.sample && h.sample.gpus) || [];
    if (gpus.length === 0 && q.matches(hostSubject(h))) return true;
    if (gpus.some((gpu) => q.matches(gpuSubject(h, gpu)))) return true;
    return procs(h).some((p) => !procGpus(p).length && q.matches(procSubject(h, p, null)));
  }

  function drawCounts() {
    let shown = 0;
    for (const h of state.hosts.values()) if (h.matched) shown++;
    const total = state.hosts.size;
    $("host-count").textContent = state.query.empty ? `${total}` : `${shown} of ${total}`;
  }

  function drawHost(h) {
    view.dirty.delete(h.name);
    const node = h.node;
    if (!node) return;
    node.className = "host status-" + cssWord(h.status);
    const head = el("header", "host-head", null, el("h3", "host-name", h.name), el("span", "badge", h.status));
    if (h.group) head.appendChild(el("span", "group", h.group));
    if (h.read_only) head.appendChild(el("span", "tag", "read-only"));
    const why = [h.reason, h.message].filter(Boolean).join(": ");
    if (why) head.appendChild(el("span", "why", why));
    const parts = [head];
    const gpus = (h.sample && h.sample.gpus) || [];
    const q = state.query;
    for (const gpu of gpus) if (q.empty || q.matches(gpuSubject(h, gpu))) parts.push(drawGpu(h, gpu));
    // Holders on no one GPU (a device file held by an unattributed process, a monitor): listed
    // under the host, as the dashboard's process table lists every process.
    const loose = procs(h).filter((p) => !procGpus(p).length && (q.empty || q.matches(procSubject(h, p, null))));
    if (loose.length) {
      parts.push(el("div", "gpu loose", null, el("div", "gpu-head", null, el("span", "gpu-index", "on no one GPU")), procTable(h, loose, null)));
    }
    if (!gpus.length) {
      const error = h.hello && h.hello.error;
      parts.push(el("p", "empty", error ? `no GPU: ${error.code}` : h.sample ? "no GPU" : "no sample yet"));
    }
    node.replaceChildren(...parts);
    node.hidden = !h.matched;
  }
  const cssWord = (word) => String(word).replace(/[^a-z-]/g, "");

  function drawGpu(h, gpu) {
    const box = el("div", "gpu");
    box.dataset.gpu = String(gpu.index);
    const used = gpu.memory_used;
    const total = gpu.memory_total;
    const share = num(used) && total ? Math.min(1, used / total) : 0;
    const bar = el("span", "bar", null, el("span", "fill"), el("span", "bar-text", `${bytes(used)} / ${bytes(total)}`));
    bar.firstChild.style.width = (100 * share).toFixed(1) + "%"; // CSSOM: allowed under the CSP
    bar.title = "memory used / total";
    const points = h.history.get(String(gpu.index)) || { util: [], memory: [] };
    const states = state.problemStates.get(h.name + "/" + gpu.index);
    const head = el(
      "div", "gpu-head", null,
      el("span", "gpu-index", `GPU ${gpu.index}`),
      el("span", "model", gpu.name || ""),
      bar,
      el("span", "util", "util " + pct(gpu.util_gpu)),
      el("span", "temp", num(gpu.temperature) ? `${gpu.temperature} °C` : "–"),
      el("span", "power", num(gpu.power_draw) ? `${Math.round(gpu.power_draw)}${num(gpu.power_limit) ? " / " + Math.round(gpu.power_limit) : ""} W` : "–"),
      spark(points.util, "util", "utilization, last readings"),
      spark(points.memory, "mem", "memory, last readings"),
    );
    for (const field of ["pod", "job"]) {
      const value = gpu[field];
      if (typeof value === "string" || num(value)) head.appendChild(titled(el("span", "tag gpu-" + field, `${field} ${value}`), `${field} ${value}`));
    }
    if (states && states.size) head.appendChild(el("span", "gpu-problems", [...states].join(", ")));
    box.appendChild(head);
    const list = procs(h).filter((p) => procGpus(p).includes(gpu.index));
    const shown = state.query.empty ? list : list.filter((p) => state.query.matches(procSubject(h, p, gpu.index)));
    if (shown.length) box.appendChild(procTable(h, shown, gpu.index));
    if (shown.length < list.length) box.appendChild(el("p", "more", `${list.length - shown.length} more processes not matching the filter`));
    return box;
  }

  function procTable(h, list, index) {
    const table = el("table", "procs");
    table.appendChild(el("thead", null, null, row("th", ["PID", "kind", "user", "job", "memory", "command"])));
    const body = el("tbody");
    for (const p of list) {
      const held = !p.gpu_memory ? null : index === null ? null : p.gpu_memory[String(index)];
      const full = Array.isArray(p.command) && p.command.length ? p.command.map(String).join(" ") : "";
      const command = full ? briefCommand(p.command) : p.name ? `[${p.name}]` : "";
      const where = [p.job, p.container].filter((v) => v !== null && v !== undefined && v !== "").join(" · ");
      const tr = row("td", [p.pid, p.kind, p.user === null || p.user === undefined ? "?" : p.user, where, bytes(held), command]);
      if (full) titled(tr.lastChild, full);
      tr.className = "kind-" + cssWord(p.kind);
      tr.dataset.pid = String(p.pid);
      const idle = idleOf(h, p);
      if (idle !== null && idle >= 60) tr.lastChild.appendChild(el("span", "tag", `idle ${span(idle)}`));
      body.appendChild(tr);
    }
    table.appendChild(body);
    return table;
  }
  function row(cell, values) {
    const tr = document.createElement("tr");
    for (const v of values) tr.appendChild(el(cell, null, v));
    return tr;
  }
  const span = (s) => (s >= 3600 ? `${(s / 3600).toFixed(1)} h` : `${Math.floor(s / 60)} min`);

  const SVG = "http://www.w3.org/2000/svg";
  function spark(values, cls, title) {
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "spark " + cls);
    svg.setAttribute("viewBox", `0 0 ${HISTORY} 100`);
    svg.setAttribute("preserveAspectRatio", "none");
    const t = document.createElementNS(SVG, "title");
    t.textContent = title;
    svg.appendChild(t);
    if (values.length > 1) {
      // the newest reading at the right edge; the area under the line filled, so that a flat line
      // at 100 % (a busy GPU) or 0 % still reads as a level
      const start = HISTORY - values.length;
      const points = values.map((v, i) => `${start + i},${100 - Math.max(0, Math.min(100, Number(v) || 0))}`);
      const area = document.createElementNS(SVG, "polygon");
      area.setAttribute("points", `${start},100 ${points.join(" ")} ${HISTORY - 1},100`);
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("points", points.join(" "));
      svg.append(area, line);
    }
    return svg;
  }

  function drawProblems() {
    const list = $("problem-list");
    const rows = state.problems.slice(0, PROBLEMS_SHOWN).map((p) => {
      const li = el("li", "problem sev-" + cssWord(p.severity), null,
        el("span", "sev", p.severity), el("span", "where", p.gpu === null || p.gpu === undefined ? p.host : `${p.host} GPU ${p.gpu}`),
        el("span", "what", p.text));
      li.dataset.host = String(p.host);
      return li;
    });
    if (state.problems.length > PROBLEMS_SHOWN) rows.push(el("li", "more", `and ${state.problems.length - PROBLEMS_SHOWN} more`));
    if (!rows.length) rows.push(el("li", "none", state.hub ? "no problems" : "waiting for the hub…"));
    list.replaceChildren(...rows);
    $("problem-count").textContent = String(state.problems.length);
  }

  /** The actions strip: the last plans' starts and verdicts, the newest first; hidden when none. */
  function drawActions() {
    const rows = state.actions
      .slice()
      .reverse()
      .map(({ host: name, record }) => {
        const where = record.gpu === null || record.gpu === undefined ? name : `${name} GPU ${record.gpu}`;
        const what = record.stage === "accepted" ? "started" : `${record.stage} ${record.result || ""}`.trim();
        const when = num(record.time) ? new Date(record.time * 1000).toLocaleTimeString() : "";
        const li = el("li", "action stage-" + cssWord(record.stage), null,
          el("span", "when", when), el("span", "where", where), el("span", "plan", `plan ${record.plan || "?"}`),
          el("span", "what result-" + cssWord(record.result || ""), what), el("span", "message", record.message || ""));
        li.dataset.host = name;
        return titled(li, record.message || "");
      });
    $("action-list").replaceChildren(...rows);
    $("actions").hidden = !rows.length;
  }

  /** GPUs, memory and processes per user over the live hosts (views/problems.py `user_usage`). */
  function drawUsers() {
    const users = new Map();
    let leftOut = 0;
    for (const h of state.hosts.values()) {
      if (h.status !== "live" || !h.sample) {
        leftOut++;
        continue;
      }
      for (const p of procs(h)) {
        if (!["user", "hidden"].includes(p.kind) || !procGpus(p).length || p.state === "Z") continue;
        if (!state.query.empty && !state.query.matches(procSubject(h, p, null))) continue;
        const name = p.user === null || p.user === undefined ? "?" : String(p.user);
        if (!users.has(name)) users.set(name, { name, memory: 0, gpus: new Set(), hosts: new Set(), processes: 0 });
        const u = users.get(name);
        for (const i of procGpus(p)) u.gpus.add(h.name + ":" + i);
        u.hosts.add(h.name);
        u.memory += Object.values(p.gpu_memory || {}).reduce((a, b) => a + (b || 0), 0);
        u.processes++;
      }
    }
    const ranked = [...users.values()].sort((a, b) => b.memory - a.memory || b.gpus.size - a.gpus.size || (a.name < b.name ? -1 : 1));
    const body = $("user-rows");
    body.replaceChildren(...ranked.map((u) => {
      const tr = row("td", [u.name, bytes(u.memory), u.gpus.size, u.processes, u.hosts.size]);
      tr.dataset.user = u.name;
      return tr;
    }));
    $("user-note").textContent = leftOut ? `${leftOut} host(s) not live are left out` : "";
  }

  // -- the filter box ---------------------------------------------------------------------------
  function onFilter() {
    const text = $("filter").value;
    try {
      state.query = GputuiFilter.parse(text);
      $("filter-error").textContent = "";
      $("filter").removeAttribute("aria-invalid");
    } catch (e) {
      if (!(e instanceof GputuiFilter.FilterError)) throw e;
      $("filter-error").textContent = printable(e.message);
      $("filter").setAttribute("aria-invalid", "true");
      return; // the last filter that could be read stays
    }
    for (const name of state.order) {
      view.unmatched.add(name);
      view.dirty.add(name); // which GPUs and processes a card lists depends on the filter
    }
    view.requeried = view.slowDue = true;
    schedule();
  }

  // -- the stream: fetch + a server-sent-events reader (EventSource cannot send a header) --------
  let backoff = BACKOFF_MIN;
  let controller = null;
  const token = () => sessionStorage.getItem(TOKEN_KEY);

  function setConnection(word, detail) {
    state.connection = word;
    const node = $("conn");
    node.textContent = detail ? `${word}: ${printable(detail)}` : word;
    node.className = "conn conn-" + cssWord(word);
  }

  async function connect() {
    controller = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (token()) headers.Authorization = "Bearer " + token();
    let response;
    try {
      response = await fetch(EVENTS, { headers, signal: controller.signal, cache: "no-store" });
    } catch (e) {
      return retry("no connection");
    }
    if (response.status === 401 || response.status === 403) {
      askToken(response.status === 401 ? "this hub needs a token" : "this token may not read the hub");
      setConnection("signed out");
      return;
    }
    if (!response.ok || !response.body) return retry(`HTTP ${response.status}`);
    dropEverything();
    schedule();
    try {
      await read(response.body.getReader());
      retry("the stream ended");
    } catch (e) {
      retry(e instanceof DeltaError ? "out of step, reloading" : "connection lost");
    }
  }
  function retry(why) {
    setConnection("reconnecting", why);
    if (controller) controller.abort();
    setTimeout(connect, backoff);
    backoff = Math.min(BACKOFF_MAX, backoff * 2);
  }

  async function read(reader) {
    const decoder = new TextDecoder("utf-8");
    let buffer = "";
    let event = "message";
    let data = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let at;
      while ((at = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + (buffer.startsWith("\r\n", at) ? 2 : 1));
        if (line === "") {
          if (data.length) dispatch(event, data.join("\n"));
          event = "message";
          data = [];
        } else if (line.startsWith(":")) {
          continue; // a comment (the hub's ping)
        } else {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let rest = colon < 0 ? "" : line.slice(colon + 1);
          if (rest.startsWith(" ")) rest = rest.slice(1);
          if (field === "event") event = rest;
          else if (field === "data") data.push(rest);
        }
      }
    }
  }

  const HANDLERS = { hub: onHub, host: onHost, hello: onHello, sample: onSample, problems: onProblems,
    reset: dropEverything, event: onEvent };
  function dispatch(event, text) {
    const handler = HANDLERS[event];
    if (!handler) return; // a frame of a later protocol: not ours to read
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return;
    }
    if (event !== "hub" && event !== "problems" && event !== "reset" && !(Array.isArray(value) && value.length === 2)) return;
    if (Array.isArray(value) && event !== "problems") value[0] = String(value[0]);
    handler(value);
    schedule();
  }

  // -- the token: from the address's #token=..., else the form; kept for this tab only ------------
  function takeTokenFromAddress() {
    const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (!match) return;
    // Out of the address bar (and the tab's history) first, whatever follows: a token that cannot
    // be read is still a secret; and a URIError here would stop the page's start.
    history.replaceState(null, "", location.pathname + location.search);
    let value;
    try {
      value = decodeURIComponent(match[1]);
    } catch (e) {
      if (!(e instanceof URIError)) throw e;
      return; // not percent-encoding: no token; a hub that needs one asks for it
    }
    if (value.trim()) sessionStorage.setItem(TOKEN_KEY, value.trim());
  }
  function askToken(why) {
    $("token-why").textContent = why;
    $("token-box").hidden = false;
    $("token").focus();
  }
  function onToken(event) {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $("token").value = "";
    $("token-box").hidden = true;
    backoff = BACKOFF_MIN;
    connect();
  }

  function start() {
    takeTokenFromAddress();
    $("filter").addEventListener("input", onFilter);
    $("token-form").addEventListener("submit", onToken);
    drawProblems();
    connect();
  }
  // What the tests ask of the page (nothing here acts on the hub).
  window.gputuiPage = { state, printable, briefCommand, applyDelta, DeltaError };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
