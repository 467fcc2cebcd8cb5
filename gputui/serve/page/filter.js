// The dashboard's filter language (gputui/views/filter.py), ported line for line so that a filter
// typed in the page narrows exactly as it does in the terminal, and fails with the same sentence.
//   query = term { " " term }      every term must match (AND)
//   term  = [ "-" ] ( field ":" value | field op amount | word )
// tests/serve/test_page.py evaluates both on one corpus of queries and subjects and compares them.
// A subject is a plain object with the fields of filter.Subject (sets as arrays).
"use strict";

const GputuiFilter = (() => {
  const STATES = [
    "live", "down", "stale", "connecting", "no-gpu", "free", "busy", "problem", "healthy", "ghost",
    "orphaned", "outside", "unaccounted", "idle-held", "throttle", "ecc", "mismatch", "error",
  ];
  const STATE_ALIASES = { idle: "idle-held", "idle-holder": "idle-held", throttling: "throttle", up: "live" };
  const KINDS = ["user", "ghost", "hidden", "monitor", "zombie"];
  const FIELDS = {
    host: "host name: host:gpu017, host:gpu0*",
    group: "host group (the config's [groups], else the name without its number): group:rack3",
    user: "a process's user, a name or a uid: user:alice, user:alice,bob (either), user:1000",
    state: "a state of the host, GPU or process: state:idle-held (see STATES)",
    kind: "a process kind: kind:ghost (user, ghost, hidden, monitor, zombie)",
    gpu: "a GPU as clean --gpu takes it: gpu:3, gpu:2,3, gpu:gpu017:3, gpu:gpu017:all, gpu:GPU-5a1b (a UUID)",
    model: "the GPU's name: model:H200",
    cmd: "a piece of a command line: cmd:train.py",
    pid: "a process ID: pid:4121",
    job: "a job id (its root's PID): job:4100",
    container: "a process's container: container:lxc/129",
    mem: "GPU memory used (a GPU) or held (a process), GiB unless a unit says: mem>40G, mem<=512M, mem>90%",
    util: "utilization in percent (a GPU's, a process's SM): util<5",
    temp: "temperature in °C: temp>80",
    idle: "how long at 0 % SM (s, m, h; a bare number is minutes): idle>30m",
  };
  const FIELD_NAMES = Object.keys(FIELDS);
  const FIELD_ALIASES = { command: "cmd", name: "model", hosts: "host", users: "user", memory: "mem" };
  const NUMERIC = ["mem", "util", "temp", "idle"];
  const NO_UID = 2 ** 32 - 1;
  const EXACT = ["host", "group", "user", "job"];
  const LISTED = ["host", "group", "user", "job", "state", "kind", "gpu", "pid"];
  const MAX_QUERY = 1000;
  const TERM = /^([A-Za-z][A-Za-z_-]*)(>=|<=|>|<|=|:)([\s\S]*)$/u;
  const SIZES = { "": 2 ** 30, b: 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 };
  const SPANS = { "": 60, s: 1, m: 60, h: 3600, d: 86400 };
  const COMPARE = {
    ">": (a, b) => a > b, ">=": (a, b) => a >= b, "<": (a, b) => a < b,
    "<=": (a, b) => a <= b, "=": (a, b) => a === b,
  };

  class FilterError extends Error {
    constructor(message, at) {
      super(message);
      this.at = at || 0;
    }
  }

  // -- Python's text rules the grammar relies on ------------------------------------------------
  // str.casefold: lower case, and the full foldings lower case alone leaves (ß is ss).
  const FOLDS = {
    "ß": "ss", "ẞ": "ss", "ς": "σ", "ſ": "s", "ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl",
    "ﬅ": "st", "ﬆ": "st", "ϐ": "β", "ϑ": "θ", "ϕ": "φ", "ϖ": "π", "ϰ": "κ", "ϱ": "ρ", "ϵ": "ε",
    "ẛ": "ṡ", "ι": "ι", "ŉ": "ʼn", "ǰ": "ǰ", "ΐ": "ΐ", "ΰ": "ΰ", "և": "եւ", "ẖ": "ẖ",
    "ẗ": "ẗ", "ẘ": "ẘ", "ẙ": "ẙ", "ẚ": "aʾ", "ﬓ": "մն", "ﬔ": "մե", "ﬕ": "մի", "ﬖ": "վն", "ﬗ": "մխ",
    "µ": "μ",
  };
  const FOLDABLE = new RegExp("[" + Object.keys(FOLDS).join("") + "]", "gu");
  const fold = (text) => text.toLowerCase().replace(FOLDABLE, (ch) => FOLDS[ch]);
  // str.isspace (the separators, and the four information separators \x1c-\x1f)
  const SPACE = /[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;
  const isSpace = (ch) => SPACE.test(ch);
  const strip = (text) => {
    const chars = Array.from(text);
    let start = 0;
    let end = chars.length;
    while (start < end && isSpace(chars[start])) start++;
    while (end > start && isSpace(chars[end - 1])) end--;
    return chars.slice(start, end).join("");
  };
  const asciiDigits = (text) => /^[0-9]+$/.test(text);
  const isDigit = (text) => /^[\p{Nd}²³¹⁰⁴-⁹₀-₉]+$/u.test(text);
  const codeLength = (text) => Array.from(text).length;
  // repr() of a string, as the error messages quote what was typed.
  const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
  const hex = (n, width) => n.toString(16).padStart(width, "0");
  function repr(text) {
    const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
    let out = quote;
    for (const ch of text) {
      const code = ch.codePointAt(0);
      if (ch === quote || ch === "\\") out += "\\" + ch;
      else if (ch === "\t") out += "\\t";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch !== " " && UNPRINTABLE.test(ch)) {
        out += code < 0x100 ? "\\x" + hex(code, 2) : code < 0x10000 ? "\\u" + hex(code, 4) : "\\U" + hex(code, 8);
      } else out += ch;
    }
    return out + quote;
  }

  // difflib.get_close_matches(word, possibilities, n=1, cutoff=0.6): SequenceMatcher's ratio.
  function longest(a, b, alo, ahi, blo, bhi, b2j) {
    let besti = alo;
    let bestj = blo;
    let bestsize = 0;
    let j2len = new Map();
    for (let i = alo; i < ahi; i++) {
      const next = new Map();
      for (const j of b2j.get(a[i]) || []) {
        if (j < blo) continue;
        if (j >= bhi) break;
        const k = (j2len.get(j - 1) || 0) + 1;
        next.set(j, k);
        if (k > bestsize) [besti, bestj, bestsize] = [i - k + 1, j - k + 1, k];
      }
      j2len = next;
    }
    return [besti, bestj, bestsize];
  }
  function ratio(a, b) {
    const b2j = new Map();
    b.forEach((ch, j) => (b2j.get(ch) || b2j.set(ch, []).get(ch)).push(j));
    let matched = 0;
    const queue = [[0, a.length, 0, b.length]];
    while (queue.length) {
      const [alo, ahi, blo, bhi] = queue.pop();
      const [i, j, k] = longest(a, b, alo, ahi, blo, bhi, b2j);
      if (!k) continue;
      matched += k;
      if (alo < i && blo < j) queue.push([alo, i, blo, j]);
      if (i + k < ahi && j + k < bhi) queue.push([i + k, ahi, j + k, bhi]);
    }
    const total = a.length + b.length;
    return total ? (2.0 * matched) / total : 1.0;
  }
  function closest(word, possibilities) {
    const b = Array.from(word);
    let best = null;
    for (const x of possibilities) {
      const score = ratio(Array.from(x), b);
      if (score < 0.6) continue;
      if (best === null || score > best[0] || (score === best[0] && x > best[1])) best = [score, x];
    }
    return best === null ? null : best[1];
  }

  // fnmatch.fnmatchcase: the whole text against a shell pattern (* ? [seq] [!seq]).
  const escapeChar = (ch) => (/[\\^$.*+?()[\]{}|/]/u.test(ch) ? "\\" + ch : ch);
  const classEscape = (text) => Array.from(text).map((ch) => ("\\]^[-".includes(ch) ? "\\" + ch : ch)).join("");
  function classOf(pat, i, j) {
    // pat[i:j] is what stands between [ and ]: as fnmatch.translate makes it a class.
    let chunks;
    if (!pat.slice(i, j).includes("-")) chunks = [pat.slice(i, j)];
    else {
      chunks = [];
      let k = pat[i] === "!" ? i + 2 : i + 1;
      for (;;) {
        k = pat.indexOf("-", k);
        if (k < 0 || k >= j) break;
        chunks.push(pat.slice(i, k));
        i = k + 1;
        k = k + 3;
      }
      const chunk = pat.slice(i, j);
      if (chunk.length) chunks.push(chunk);
      else chunks[chunks.length - 1] += "-";
      for (let k2 = chunks.length - 1; k2 > 0; k2--) {
        const prev = chunks[k2 - 1];
        if (prev[prev.length - 1] > chunks[k2][0]) {
          chunks[k2 - 1] = prev.slice(0, -1) + chunks[k2].slice(1);
          chunks.splice(k2, 1);
        }
      }
    }
    const stuff = chunks.join("-");
    if (!stuff) return "(?!)";
    if (stuff === "!") return "[\\s\\S]";
    const negated = stuff[0] === "!";
    const body = (negated ? chunks.map((c, n) => (n === 0 ? c.slice(1) : c)) : chunks).map(classEscape);
    return "[" + (negated ? "^" : "") + body.join("-") + "]";
  }
  function globRegex(pattern) {
    const pat = Array.from(pattern);
    let out = "";
    let i = 0;
    while (i < pat.length) {
      const c = pat[i++];
      if (c === "*") out += "[\\s\\S]*";
      else if (c === "?") out += "[\\s\\S]";
      else if (c === "[") {
        let j = i;
        if (j < pat.length && pat[j] === "!") j++;
        if (j < pat.length && pat[j] === "]") j++;
        while (j < pat.length && pat[j] !== "]") j++;
        if (j >= pat.length) out += "\\[";
        else {
          out += classOf(pat, i, j);
          i = j + 1;
        }
      } else out += escapeChar(c);
    }
    return new RegExp("^(?:" + out + ")$", "u");
  }
  const globs = new Map();
  function glob(text, pattern) {
    let re = globs.get(pattern);
    if (re === undefined) {
      re = globRegex(pattern);
      if (globs.size > 256) globs.clear();
      globs.set(pattern, re);
    }
    return re.test(fold(text));
  }
  const has = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
  const named = (text, folded, wild) => (wild ? glob(text, folded) : fold(text) === folded);
  const isWild = (value) => /[*?[]/.test(value);
  const after = (field) => {
    const words = FIELDS[field];
    const at = words.indexOf(": ");
    return at < 0 ? words : words.slice(at + 2);
  };

  // -- the parser -------------------------------------------------------------------------------
  function split(text) {
    const chars = Array.from(text);
    const out = [];
    let i = 0;
    while (i < chars.length) {
      if (isSpace(chars[i])) {
        i++;
        continue;
      }
      const start = i;
      let raw = "";
      let quoted = false;
      while (i < chars.length && (quoted || !isSpace(chars[i]))) {
        if (chars[i] === '"') {
          quoted = !quoted;
          raw += "\x00"; // a quote: what follows is a value or a word, not an operator
        } else raw += chars[i];
        i++;
      }
      if (quoted) throw new FilterError(`the quote at character ${start + 1} is never closed: add a closing "`, start);
      out.push([raw, start]);
    }
    return out;
  }

  function term(raw, at) {
    const negated = raw.startsWith("-");
    const body = negated ? raw.slice(1) : raw;
    const match = TERM.exec(body);
    if (match === null) {
      const word = body.split("\x00").join("");
      if (!word) throw new FilterError("an empty word: write something after the -", at);
      const folded = fold(word);
      return { negated, test: (s) => hasWord(s, folded) };
    }
    let name = fold(match[1]);
    const op = match[2];
    const value = match[3].split("\x00").join("");
    name = FIELD_ALIASES[name] || name;
    if (!(name in FIELDS)) {
      const close = closest(name, FIELD_NAMES);
      const hint = close ? `did you mean ${close}${op}? ` : "";
      throw new FilterError(
        `unknown field ${repr(match[1])}: ${hint}fields are ${FIELD_NAMES.join(", ")} ` +
          `(to search for the text itself, quote it: "${body.split("\x00").join("")}")`,
        at,
      );
    }
    if (!value) throw new FilterError(`${name}${op} needs a value: ${after(name)}`, at);
    if (NUMERIC.includes(name)) return comparison(name, op, value, negated, at);
    if (op !== ":") throw new FilterError(`${name} is compared with ':' (${after(name)}), not ${repr(op)}`, at);
    return matchTerm(name, value, negated, at);
  }

  function matchTerm(name, value, negated, at) {
    if (!LISTED.includes(name)) return { negated, test: one(name, value, at) };
    const tests = value.split(",").map((item) => {
      if (!item) throw new FilterError(`an empty name in ${name}:${value}: write ${name}:a,b`, at);
      return one(name, item, at);
    });
    return { negated, test: tests.length === 1 ? tests[0] : (s) => tests.some((t) => t(s)) };
  }

  function one(name, value, at) {
    const folded = fold(value);
    if (name === "state") {
      const state = STATE_ALIASES[folded] || folded;
      if (!STATES.includes(state)) {
        const close = closest(state, [...STATES, ...Object.keys(STATE_ALIASES)]);
        const hint = close ? `did you mean state:${STATE_ALIASES[close] || close}? ` : "";
        throw new FilterError(`unknown state ${repr(value)}: ${hint}states are ${STATES.join(", ")}`, at);
      }
      return (s) => s.states.includes(state);
    }
    if (name === "kind") {
      if (!KINDS.includes(folded)) throw new FilterError(`unknown kind ${repr(value)}: kinds are ${KINDS.join(", ")}`, at);
      return (s) => s.kinds.includes(folded);
    }
    if (name === "gpu") return gpuTest(value, at);
    if (name === "user") return userTest(value, at);
    if (name === "pid") {
      const number = smallNumber(folded);
      if (number === null) throw new FilterError(`pid:${value} is no PID: pid:4121`, at);
      return (s) => s.pids.includes(number);
    }
    const wild = isWild(value);
    if (EXACT.includes(name)) {
      const texts = { host: (s) => [s.host], group: (s) => [s.group], job: (s) => s.jobs }[name];
      return (s) => texts(s).some((t) => named(t, folded, wild));
    }
    const pieces = { model: (s) => s.models, cmd: (s) => s.commands, container: (s) => s.containers }[name];
    if (wild) return (s) => pieces(s).some((t) => glob(t, folded));
    return (s) => pieces(s).some((t) => fold(t).includes(folded));
  }

  function userTest(value, at) {
    const folded = fold(value);
    if (folded.startsWith("-")) throw new FilterError(`user:${value} is no user name or uid: user:alice, user:1000`, at);
    if (asciiDigits(folded)) {
      const uid = folded.length <= String(NO_UID).length ? Number(folded) : NO_UID;
      if (uid >= NO_UID) {
        throw new FilterError(`user:${Array.from(value).slice(0, 20).join("")} is no uid: a uid is below ${NO_UID}`, at);
      }
      return (s) => s.uids.includes(uid) || s.users.includes(folded);
    }
    const wild = isWild(value);
    return (s) => s.users.some((t) => named(t, folded, wild));
  }

  const smallNumber = (text) => (asciiDigits(text) && text.length <= 9 ? Number(text) : null);

  function gpuTest(value, at) {
    const folded = fold(value);
    if ((folded.startsWith("gpu-") || folded.startsWith("mig-")) && !folded.includes(":")) {
      return (s) => s.uuids.some((u) => fold(u).startsWith(folded));
    }
    const cut = folded.lastIndexOf(":");
    const sep = cut >= 0;
    const host = sep ? folded.slice(0, cut) : "";
    const index = sep ? folded.slice(cut + 1) : folded;
    const number = smallNumber(index);
    if ((sep && !host) || (index !== "all" && number === null)) {
      throw new FilterError(
        `gpu:${value} is no GPU index, HOST:INDEX, HOST:all or UUID (gpu:3, gpu:gpu017:3, gpu:GPU-5a1b)`,
        at,
      );
    }
    const on = (s) => (number === null ? s.gpus.length > 0 : s.gpus.includes(number));
    if (!sep) return on;
    const wild = isWild(host);
    return (s) => named(s.host, host, wild) && on(s);
  }

  function comparison(name, op, value, negated, at) {
    if (op === ":") throw new FilterError(`${name} compares: ${after(name)}`, at);
    const amount = /^([0-9]+(?:\.[0-9]+)?)[\p{White_Space}\x1c-\x1f]*([A-Za-z%°]*)$/u.exec(strip(value));
    if (amount === null) throw new FilterError(`${name}${op}${value}: not an amount (${after(name)})`, at);
    let number = parseFloat(amount[1]);
    const unit = fold(amount[2]);
    let percent = false;
    if (name === "mem") {
      if (unit === "%") percent = true;
      else {
        const prefix = unit === "b" ? unit : unit.endsWith("ib") ? unit.slice(0, -2) : unit.endsWith("b") ? unit.slice(0, -1) : unit;
        const scale = has(SIZES, prefix) ? SIZES[prefix] : undefined;
        if (scale === undefined) throw new FilterError(`${name}${op}${value}: a size is 40G, 40GiB, 512M, 1.5T or 90%`, at);
        number *= scale;
      }
    } else if (name === "idle") {
      const key = ["s", "m", "h", "d", "min", "sec"].includes(unit) ? unit.slice(0, 1) : unit;
      const scale = has(SPANS, key) ? SPANS[key] : undefined;
      if (scale === undefined) {
        throw new FilterError(`${name}${op}${value}: a time is 30s, 10m, 2h or 1d (a bare number: minutes)`, at);
      }
      number *= scale;
    } else if (!["", "%", "c", "°c", "°"].includes(unit)) {
      throw new FilterError(`${name}${op}${value}: a plain number (${after(name)})`, at);
    }
    const compare = COMPARE[op];
    const test = (s) => {
      if (name === "mem") {
        if (s.memory === null || s.memory === undefined) return false;
        if (percent) return Boolean(s.memory_total) && compare((100.0 * s.memory) / (s.memory_total || 1), number);
        return compare(s.memory, number);
      }
      const got = s[name];
      return got !== null && got !== undefined && compare(got, number);
    };
    return { negated, test };
  }

  function hasWord(s, folded) {
    const texts = [s.host, ...s.models, ...s.commands, ...s.users, ...s.containers, ...s.words];
    if (texts.some((t) => fold(t).includes(folded))) return true;
    if (isDigit(folded)) return s.pids.some((p) => String(p).includes(folded)) || s.jobs.includes(folded);
    return s.jobs.some((j) => fold(j) === folded);
  }

  /** `text` as a query: {text, terms, matches(subject)}; throws FilterError with the dashboard's words. */
  function parse(text) {
    if (codeLength(text) > MAX_QUERY) throw new FilterError(`a filter of at most ${MAX_QUERY} characters, please`, MAX_QUERY);
    const terms = split(text).map(([raw, at]) => term(raw, at));
    return { text, empty: terms.length === 0, matches: (s) => terms.every((t) => t.test(s) !== t.negated) };
  }

  return { parse, FilterError, STATES, KINDS, fold, repr };
})();

if (typeof window !== "undefined") window.GputuiFilter = GputuiFilter;
