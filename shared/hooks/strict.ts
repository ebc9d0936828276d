// Strict reading of a hook's answer (docs/controllers/compositecontroller.md#hook-versions): Metacontroller's
// `responseUnMarshallMode: strict` refuses an answer that names a field twice in one object, which JSON.parse
// would read silently as the last one. Pure: the answer's text in, the first duplicated field out.

/**
 * The first field named twice in one object of a JSON text, as a path (`status.phase`, `children[0].metadata.name`),
 * or undefined. The text must already parse as JSON (JSON.parse first): this only scans its structure.
 */
export function duplicateKey(text: string): string | undefined {
  // One frame per open object or array: the keys seen (objects), the index reached (arrays), where it is.
  const stack: Array<{ keys?: Set<string>; index: number; path: string; expectKey: boolean }> = [];
  let pendingKey: string | undefined;
  const childPath = () => {
    const top = stack.at(-1);
    if (!top) return '';
    if (top.keys) return top.path ? `${top.path}.${pendingKey ?? ''}` : (pendingKey ?? '');
    return `${top.path}[${top.index}]`;
  };
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const top = stack.at(-1);
      if (top?.keys && top.expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (top.keys.has(key)) return top.path ? `${top.path}.${key}` : key;
        top.keys.add(key);
        top.expectKey = false;
        pendingKey = key;
      }
      i = j;
    } else if (c === '{' || c === '[') {
      const path = childPath();
      stack.push(c === '{' ? { keys: new Set(), index: 0, path, expectKey: true } : { index: 0, path, expectKey: false });
    } else if (c === '}' || c === ']') {
      stack.pop();
    } else if (c === ',') {
      const top = stack.at(-1);
      if (top?.keys) top.expectKey = true;
      else if (top) top.index += 1;
    }
  }
  return undefined;
}
