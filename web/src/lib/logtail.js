// The tail of a followed log: chunks as they arrive, with the oldest dropped (on
// a line boundary) once the whole passes maxChars or maxLines, so a node log
// followed for hours does not grow the page without limit.

export const LOG_MAX_CHARS = 1 << 20;  // ~1 MiB of text
export const LOG_MAX_LINES = 20000;

function newlines(s) {
  let n = 0;
  for (let i = s.indexOf('\n'); i >= 0; i = s.indexOf('\n', i + 1)) n += 1;
  return n;
}

/**
 * Keeps chunks: anything with a writable string `data` and a `remove()` (the
 * page's Text nodes inside a <pre>; plain objects in tests).
 *
 * Thread contract: the page has one thread.
 */
export class LogTail {
  constructor(maxChars = LOG_MAX_CHARS, maxLines = LOG_MAX_LINES) {
    this.maxChars = maxChars;
    this.maxLines = maxLines;
    this.chunks = [];  // [{node, lines}]
    this.chars = 0;
    this.lines = 0;
    this.dropped = false;  // whether anything was dropped since the last clear()
  }

  /** Adds a chunk at the end; drops from the front what is over the limits. */
  push(node) {
    const lines = newlines(node.data);
    this.chunks.push({ node, lines });
    this.chars += node.data.length;
    this.lines += lines;
    this.trim();
  }

  clear() {
    for (const c of this.chunks) c.node.remove();
    this.chunks = [];
    this.chars = 0;
    this.lines = 0;
    this.dropped = false;
  }

  trim() {
    // Whole chunks first, while what stays is still over a limit.
    while (this.chunks.length > 1 && (this.chars > this.maxChars || this.lines > this.maxLines)) {
      const first = this.chunks[0];
      const rest = { chars: this.chars - first.node.data.length, lines: this.lines - first.lines };
      if (rest.chars < this.maxChars && rest.lines < this.maxLines) break;
      this.chunks.shift();
      first.node.remove();
      this.chars = rest.chars;
      this.lines = rest.lines;
      this.dropped = true;
    }
    if (this.chars <= this.maxChars && this.lines <= this.maxLines) return;
    // Then the front of the first chunk, up to the start of a line.
    const first = this.chunks[0];
    const text = first.node.data;
    let cut = Math.max(0, this.chars - this.maxChars);
    let extraLines = this.lines - this.maxLines;
    if (extraLines > 0) {
      let i = -1;
      while (extraLines > 0 && (i = text.indexOf('\n', i + 1)) >= 0) extraLines -= 1;
      cut = Math.max(cut, i + 1);
    }
    if (cut > 0 && text[cut - 1] !== '\n') {
      const nl = text.indexOf('\n', cut);
      cut = nl < 0 ? text.length : nl + 1;
    }
    const kept = text.slice(cut);
    if (!kept && this.chunks.length > 1) {
      this.chunks.shift();
      first.node.remove();
      this.chars -= text.length;
      this.lines -= first.lines;
      this.dropped = true;
      return;
    }
    const removedLines = first.lines - newlines(kept);
    first.node.data = kept;
    first.lines -= removedLines;
    this.chars -= cut;
    this.lines -= removedLines;
    this.dropped = true;
  }
}
