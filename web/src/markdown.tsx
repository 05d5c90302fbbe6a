/**
 * A small Markdown renderer for untrusted agent text that builds Preact nodes, never HTML.
 *
 * Every character of the input ends up in a text node, so HTML in agent output (`<img onerror>`,
 * `<script>`) shows as text and cannot run. Links are kept only for http(s) and mailto URLs;
 * anything else (`javascript:`, `data:`, relative tricks) renders as plain text. Supported:
 * headings, paragraphs, fenced and indented code, block quotes, bullet and numbered lists,
 * `code`, **bold**, *italic*, ~~strike~~, [links](https://…) and bare https:// URLs.
 */
import type { ComponentChildren, JSX } from "preact";

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

/** `url` when it is safe to put in an href, else null. */
export function safeHref(url: string): string | null {
  const trimmed = url.trim();
  if (!SAFE_URL.test(trimmed)) return null;
  try {
    const parsed = new URL(trimmed);
    return ["http:", "https:", "mailto:"].includes(parsed.protocol) ? parsed.href : null;
  } catch {
    return null;
  }
}

type Inline = ComponentChildren[];

const INLINE =
  /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|~~([^~]+)~~|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]*)\]\(([^)\s]*)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

/**
 * Inline spans of one block's text. Inside a link's label (`links` false) links are text: an
 * anchor cannot hold another, and a bare URL as its own label would be parsed as a link again
 * and again.
 */
export function inline(text: string, links = true): Inline {
  const out: Inline = [];
  let rest = text;
  while (rest.length > 0) {
    const m = INLINE.exec(rest);
    if (m === null) {
      out.push(rest);
      break;
    }
    if (m.index > 0) out.push(rest.slice(0, m.index));
    const [whole, , code, bold1, bold2, strike, em1, em2, label, href, bare] = m;
    if (code !== undefined) out.push(<code>{code}</code>);
    else if (bold1 !== undefined || bold2 !== undefined) out.push(<strong>{inline(bold1 ?? bold2 ?? "", links)}</strong>);
    else if (strike !== undefined) out.push(<s>{inline(strike, links)}</s>);
    else if (em1 !== undefined || em2 !== undefined) out.push(<em>{inline(em1 ?? em2 ?? "", links)}</em>);
    else if (!links) out.push(whole);
    else if (label !== undefined) out.push(link(label, href ?? "", whole));
    else if (bare !== undefined) out.push(link(bare, bare, bare));
    rest = rest.slice(m.index + whole.length);
  }
  return out;
}

function link(label: string, href: string, source: string): ComponentChildren {
  const safe = safeHref(href);
  if (safe === null) return source; // shown as typed, never clickable
  return (
    <a href={safe} target="_blank" rel="noopener noreferrer nofollow">
      {inline(label, false)}
    </a>
  );
}

const FENCE = /^(\s{0,3})(`{3,}|~{3,})\s*([\w+-]*)/;
const HEADING = /^(#{1,6})\s+(.*)$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;

/** Block structure of `source`, as Preact nodes. */
export function Markdown({ source }: { source: string }): JSX.Element {
  return <div class="md">{blocks(source.split("\n"))}</div>;
}

function blocks(lines: string[]): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i] ?? "";
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[2] ?? "```";
      const body: string[] = [];
      i++;
      while (i < lines.length && !(lines[i] ?? "").trimStart().startsWith(marker)) body.push(lines[i++] ?? "");
      i++; // the closing fence (or the end)
      out.push(
        <pre>
          <code>{body.join("\n")}</code>
        </pre>,
      );
      continue;
    }
    if (line.trim() === "") {
      i++;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const level = Math.min(6, (heading[1] ?? "#").length + 2); // agent h1 → h3: below the page's
      const Tag = `h${level}` as "h3";
      out.push(<Tag>{inline(heading[2] ?? "")}</Tag>);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out.push(<hr />);
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body: string[] = [];
      while (i < lines.length && QUOTE.test(lines[i] ?? "")) body.push(QUOTE.exec(lines[i++] ?? "")?.[1] ?? "");
      out.push(<blockquote>{blocks(body)}</blockquote>);
      continue;
    }
    if (BULLET.test(line) || NUMBERED.test(line)) {
      const ordered = NUMBERED.test(line);
      const pattern = ordered ? NUMBERED : BULLET;
      const items: string[][] = [];
      while (i < lines.length) {
        const current = lines[i] ?? "";
        const m = pattern.exec(current);
        if (m) items.push([(ordered ? m[2] : m[1]) ?? ""]);
        else if (/^\s{2,}\S/.test(current) && items.length > 0) items[items.length - 1]?.push(current.trim());
        else break;
        i++;
      }
      const children = items.map((item) => <li>{inline(item.join(" "))}</li>);
      out.push(ordered ? <ol>{children}</ol> : <ul>{children}</ul>);
      continue;
    }
    if (/^ {4}/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && (/^ {4}/.test(lines[i] ?? "") || (lines[i] ?? "").trim() === "")) {
        body.push((lines[i++] ?? "").slice(4));
      }
      out.push(
        <pre>
          <code>{body.join("\n").replace(/\n+$/, "")}</code>
        </pre>,
      );
      continue;
    }
    const para: string[] = [];
    while (i < lines.length) {
      const current = lines[i] ?? "";
      if (current.trim() === "" || FENCE.test(current) || HEADING.test(current) || QUOTE.test(current)) break;
      if (para.length > 0 && (BULLET.test(current) || NUMBERED.test(current))) break;
      para.push(current);
      i++;
    }
    const children: ComponentChildren[] = [];
    para.forEach((text, n) => {
      if (n > 0) children.push(<br />);
      children.push(...inline(text));
    });
    out.push(<p>{children}</p>);
  }
  return out;
}
