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
export type Selector = { readonly kind: 'none' } | { readonly kind: 'requirements'; readonly requirements: readonly LabelSelectorRequirement[] };

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
