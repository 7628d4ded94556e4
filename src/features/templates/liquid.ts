/**
 * A structural check of Liquid, enough to refuse what Braze calls "malformed liquid" without a Liquid engine: every
 * `{{` has its `}}`, every `{%` its `%}`, and the block tags (`if`, `unless`, `for`, `case`, `capture`, `tablerow`,
 * `comment`, `raw`) are closed by their `end...` in order. What is inside a tag is not parsed: an unknown filter or
 * a wrong expression passes here (the original would refuse some of those).
 */

const BLOCK_TAGS = new Set(['if', 'unless', 'for', 'case', 'capture', 'tablerow', 'comment', 'raw']);
const OPENER = /\{\{|\{%/g;

/** The tag name of `{% name args %}` (`-` trims allowed), lower-cased. */
const tagName = (inner: string) => /^-?\s*([A-Za-z_]+)/.exec(inner)?.[1]?.toLowerCase() ?? '';

/** True when the text's Liquid delimiters and block tags are balanced. */
export function liquidIsWellFormed(text: string): boolean {
  const open: string[] = [];
  OPENER.lastIndex = 0;
  for (let m = OPENER.exec(text); m !== null; m = OPENER.exec(text)) {
    const closer = m[0] === '{{' ? '}}' : '%}';
    const end = text.indexOf(closer, m.index + 2);
    if (end < 0) return false;
    OPENER.lastIndex = end + 2;
    if (closer === '}}') continue;
    const name = tagName(text.slice(m.index + 2, end));
    if (name === '') return false;
    if (name === 'raw' || name === 'comment') {
      // Their bodies are not Liquid: skip to the end tag.
      const endTag = new RegExp(`\\{%-?\\s*end${name}\\s*-?%\\}`, 'g');
      endTag.lastIndex = end + 2;
      const closing = endTag.exec(text);
      if (!closing) return false;
      OPENER.lastIndex = closing.index + closing[0].length;
    } else if (BLOCK_TAGS.has(name)) {
      open.push(name);
    } else if (name.startsWith('end') && BLOCK_TAGS.has(name.slice(3))) {
      if (open.pop() !== name.slice(3)) return false;
    }
  }
  return open.length === 0;
}
