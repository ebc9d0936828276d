// Label selectors with apimachinery's semantics (metav1.LabelSelector): matchLabels and matchExpressions
// (In, NotIn, Exists, DoesNotExist) are ANDed; an empty selector matches every object; a missing (null)
// selector matches none. The same selector can be turned into the `labelSelector` query string so that the
// apiserver filters with it; the tests check that both agree on random objects.

export interface LabelSelectorRequirement {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export type Labels = Readonly<Record<string, string>> | undefined;

/** A checked selector. `none` is the missing selector: it matches nothing. */
export type Selector =
  { readonly kind: 'none' } | { readonly kind: 'requirements'; readonly requirements: readonly LabelSelectorRequirement[] };

export class SelectorError extends Error {
  constructor(message: string) {
    super(`invalid label selector: ${message}`);
    this.name = 'SelectorError';
  }
}

// Label keys: an optional DNS-subdomain prefix and a name of at most 63 characters; values at most 63.
const NAME = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/;
const PREFIX = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function checkKey(key: string, where: string): void {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !PREFIX.test(prefix))) {
    throw new SelectorError(`${where}: key ${JSON.stringify(key)} has an invalid prefix`);
  }
  if (!NAME.test(name)) throw new SelectorError(`${where}: key ${JSON.stringify(key)} is not a valid label key`);
}

function checkValue(value: string, where: string): void {
  if (value !== '' && !NAME.test(value)) throw new SelectorError(`${where}: value ${JSON.stringify(value)} is not a valid label value`);
}

/** Validates a selector as the apiserver would, and compiles it. `null`/`undefined` is the missing selector. */
export function compileSelector(selector: LabelSelector | null | undefined): Selector {
  if (selector === null || selector === undefined) return { kind: 'none' };
  const requirements: LabelSelectorRequirement[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    checkKey(key, `matchLabels`);
    checkValue(value, `matchLabels[${key}]`);
    requirements.push({ key, operator: 'In', values: [value] });
  }
  for (const [i, req] of (selector.matchExpressions ?? []).entries()) {
    const where = `matchExpressions[${i}]`;
    checkKey(req.key, where);
    const values = req.values ?? [];
    switch (req.operator) {
      case 'In':
      case 'NotIn':
        if (values.length === 0) throw new SelectorError(`${where}: operator ${req.operator} needs at least one value`);
        for (const v of values) checkValue(v, where);
        break;
      case 'Exists':
      case 'DoesNotExist':
        if (values.length > 0) throw new SelectorError(`${where}: operator ${req.operator} takes no values`);
        break;
      default:
        throw new SelectorError(`${where}: unknown operator ${JSON.stringify((req as { operator: unknown }).operator)}`);
    }
    requirements.push({ key: req.key, operator: req.operator, values: [...values] });
  }
  return { kind: 'requirements', requirements };
}

export function matches(selector: Selector, labels: Labels): boolean {
  if (selector.kind === 'none') return false;
  const l = labels ?? {};
  return selector.requirements.every((r) => {
    const has = Object.hasOwn(l, r.key);
    switch (r.operator) {
      case 'In':
        return has && r.values!.includes(l[r.key]!);
      case 'NotIn':
        return !has || !r.values!.includes(l[r.key]!);
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
    }
  });
}

/**
 * The selector as a `labelSelector` query parameter. A missing selector has no string form (it selects
 * nothing, so there is nothing to ask for): callers skip the list; an empty selector is the empty string.
 */
export function selectorString(selector: Selector): string | undefined {
  if (selector.kind === 'none') return undefined;
  return selector.requirements
    .map((r) => {
      const values = [...new Set(r.values ?? [])].sort();
      switch (r.operator) {
        case 'In':
          return values.length === 1 ? `${r.key}=${values[0]}` : `${r.key} in (${values.join(',')})`;
        case 'NotIn':
          return values.length === 1 ? `${r.key}!=${values[0]}` : `${r.key} notin (${values.join(',')})`;
        case 'Exists':
          return r.key;
        case 'DoesNotExist':
          return `!${r.key}`;
      }
    })
    .join(',');
}

// The string form (apimachinery's labels.Parse, as `labelSelector` query parameters and a scale subresource's
// selectorpath carry it): requirements separated by commas, each `k`, `!k`, `k=v`, `k==v`, `k!=v`,
// `k in (v,...)` or `k notin (v,...)`; whitespace between tokens is ignored. The apiserver also takes `k>n`
// and `k<n`, which a LabelSelector cannot hold: refused here by name.
type Operator = '!' | '=' | '==' | '!=' | '(' | ')' | ',' | '<' | '>';
type Token = { kind: 'word'; text: string } | { kind: 'op'; text: Operator };

const SPECIAL = new Set(['!', '=', '(', ')', ',', '<', '>']);
const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\r';

function tokenize(s: string): Token[] {
  const tokens: Token[] = [];
  for (let i = 0; i < s.length;) {
    const c = s[i]!;
    if (isSpace(c)) {
      i += 1;
    } else if (SPECIAL.has(c)) {
      const two = s.slice(i, i + 2);
      if (two === '==' || two === '!=') {
        tokens.push({ kind: 'op', text: two });
        i += 2;
      } else {
        tokens.push({ kind: 'op', text: c as Operator });
        i += 1;
      }
    } else {
      let j = i;
      while (j < s.length && !isSpace(s[j]!) && !SPECIAL.has(s[j]!)) j += 1;
      tokens.push({ kind: 'word', text: s.slice(i, j) });
      i = j;
    }
  }
  return tokens;
}

/**
 * Parses a selector's string form into a LabelSelector (`=`/`==` into matchLabels unless the key is there
 * already, the rest into matchExpressions), checked as compileSelector checks it. The empty string is the
 * empty selector (it matches everything, as the apiserver reads it); anything malformed is a SelectorError
 * naming the problem, never a selector that matches more than was written.
 */
export function parseSelector(input: string): LabelSelector {
  const tokens = tokenize(input);
  const matchLabels: Record<string, string> = {};
  const matchExpressions: LabelSelectorRequirement[] = [];
  let i = 0;
  let requirementIndex = 0;
  const where = () => `${JSON.stringify(input)}, requirement ${requirementIndex + 1}`;
  const peek = () => tokens[i];
  const fail = (problem: string): never => {
    throw new SelectorError(`${where()}: ${problem}`);
  };
  const word = (what: string): string => {
    const t = tokens[i];
    if (t?.kind !== 'word') fail(`expected ${what}, found ${t ? `'${t.text}'` : 'the end'}`);
    i += 1;
    return (t as { text: string }).text;
  };
  // A value may be empty (`k=`, `k in (a,)`): the empty label value.
  const value = (): string => (peek()?.kind === 'word' ? word('a value') : '');
  const values = (): string[] => {
    if (peek()?.text !== '(') fail(`expected '(' after the operator, found ${peek() ? `'${peek()!.text}'` : 'the end'}`);
    i += 1;
    const out = [value()];
    while (peek()?.text === ',') {
      i += 1;
      out.push(value());
    }
    if (peek()?.text !== ')') fail(`expected ',' or ')' in the value list, found ${peek() ? `'${peek()!.text}'` : 'the end'}`);
    i += 1;
    return [...new Set(out)];
  };
  if (tokens.length === 0) return {};
  for (;;) {
    if (peek()?.text === '!') {
      i += 1;
      const key = word('a key after !');
      checkKey(key, where());
      matchExpressions.push({ key, operator: 'DoesNotExist' });
    } else {
      const key = word('a key');
      checkKey(key, where());
      const op = peek();
      if (op === undefined || op.text === ',') {
        matchExpressions.push({ key, operator: 'Exists' });
      } else if (op.text === '=' || op.text === '==' || op.text === '!=') {
        i += 1;
        const v = value();
        checkValue(v, where());
        if (op.text === '!=') matchExpressions.push({ key, operator: 'NotIn', values: [v] });
        else if (Object.hasOwn(matchLabels, key)) matchExpressions.push({ key, operator: 'In', values: [v] });
        else matchLabels[key] = v;
      } else if (op.kind === 'word' && (op.text === 'in' || op.text === 'notin')) {
        i += 1;
        const vs = values();
        for (const v of vs) checkValue(v, where());
        matchExpressions.push({ key, operator: op.text === 'in' ? 'In' : 'NotIn', values: vs });
      } else if (op.text === '<' || op.text === '>') {
        fail(`operator '${op.text}' (Gt/Lt) cannot be held by a LabelSelector`);
      } else {
        fail(`expected an operator (=, ==, !=, in, notin) or ',' after key ${JSON.stringify(key)}, found '${op.text}'`);
      }
    }
    if (i === tokens.length) break;
    if (peek()?.text !== ',') fail(`expected ',' between requirements, found '${peek()!.text}'`);
    i += 1;
    requirementIndex += 1;
    if (i === tokens.length) fail('a trailing comma');
  }
  return { ...(Object.keys(matchLabels).length ? { matchLabels } : {}), ...(matchExpressions.length ? { matchExpressions } : {}) };
}

/**
 * The selector at a parent's selector path, whatever its form: a LabelSelector object, or its string form
 * (a scale subresource's selectorpath, such as LeaderWorkerSet's `status.hpaPodSelector`). Absent is the
 * missing selector (matches nothing); any other value is a SelectorError.
 */
export function selectorAt(value: unknown): Selector {
  if (value === null || value === undefined) return { kind: 'none' };
  if (typeof value === 'string') return compileSelector(parseSelector(value));
  if (typeof value !== 'object' || Array.isArray(value))
    throw new SelectorError(`expected a LabelSelector or its string form, found ${Array.isArray(value) ? 'an array' : typeof value}`);
  return compileSelector(value as LabelSelector);
}
