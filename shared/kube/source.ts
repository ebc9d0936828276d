// A level-triggered event source for one resource: list, then watch from the list's resourceVersion; on
// 410 Gone or any break, list again and diff against what it had seen, so that a change made while it was
// not watching (an object deleted, say) still produces an event. At least once: an event may repeat, never
// go missing. Events are delivered one at a time and awaited, so a slow consumer slows the source instead of
// growing a buffer; an event whose consumer fails counts as not seen, and the relist that follows delivers it
// again. Memory follows the number of objects, not their size, when the consumer keeps less than whole objects
// (`keep`), and relists read pages of a byte budget (docs/operations/forwarder.md#memory).
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from './client.ts';
import { isKubeError } from './errors.ts';
import { gvrString, type GVR, type KubeObject } from './resource.ts';

export type SourceEventType = 'added' | 'modified' | 'deleted';

export interface SourceEvent {
  type: SourceEventType;
  object: KubeObject;
  /** What the source last saw of the object, for a modification. */
  oldObject?: KubeObject | undefined;
}

export interface WatchSourceOptions {
  client: KubeClient;
  resource: GVR;
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  onEvent: (event: SourceEvent) => Promise<void>;
  /** Called after every completed list (the initial one and each relist). */
  onSynced?: () => void;
  onError?: (err: unknown) => void;
  signal: AbortSignal;
  /** Server-side watch timeout; the source re-watches after it without relisting. */
  watchTimeoutSeconds?: number;
  maxBackoffMs?: number;
  /**
   * Watch and list the objects' metadata only (PartialObjectMetadata), stamped with this type so consumers see
   * the resource's own apiVersion and kind: no spec, status or data crosses the wire.
   */
  metadataOnly?: { apiVersion: string; kind: string } | undefined;
  /**
   * What the consumer already has, by uid, to diff the first list against (a restarted forwarder's last
   * acknowledged state): objects unchanged since produce no event, objects gone since produce a deletion.
   */
  known?: ReadonlyMap<string, KubeObject>;
  /** What the source keeps of each object to diff against and hand back as `oldObject`: by default the whole object. */
  keep?: (object: KubeObject) => KubeObject;
  /** Relists read pages of about this many bytes (default 4 MiB), however large the objects are. */
  pageBytes?: number;
}

/** The apiserver's usual page size, and the most a page holds here whatever the objects' size. */
const MAX_PAGE_ITEMS = 500;
/** Until a page has been measured, objects are taken to be as large as annotations may make them. */
const FIRST_ITEM_BYTES = 256 * 1024;

export async function runWatchSource(opts: WatchSourceOptions): Promise<void> {
  const known = new Map<string, KubeObject>(opts.known ?? []);
  const paging = { itemBytes: FIRST_ITEM_BYTES };
  const keep = opts.keep ?? ((o: KubeObject) => o);
  const maxBackoff = opts.maxBackoffMs ?? 30_000;
  let backoff = 250;
  while (!opts.signal.aborted) {
    try {
      const resourceVersion = await relist(opts, known, paging, keep);
      opts.onSynced?.();
      backoff = 250;
      let rv = resourceVersion;
      // Re-watch from the last seen resourceVersion while the server keeps closing watches normally.
      while (!opts.signal.aborted) {
        await opts.client.watch(
          opts.resource,
          {
            namespace: opts.namespace,
            labelSelector: opts.labelSelector,
            resourceVersion: rv,
            allowWatchBookmarks: true,
            timeoutSeconds: opts.watchTimeoutSeconds ?? 300,
            metadataOnly: opts.metadataOnly !== undefined,
          },
          async (watched) => {
            rv = watched.object.metadata.resourceVersion ?? rv;
            if (watched.type === 'BOOKMARK') return;
            const e = opts.metadataOnly ? { ...watched, object: { ...watched.object, ...opts.metadataOnly } } : watched;
            const uid = e.object.metadata.uid ?? '';
            // Known only once the consumer took it (here and in the relist): a failure leaves it to the relist.
            if (e.type === 'DELETED') {
              await opts.onEvent({ type: 'deleted', object: e.object });
              known.delete(uid);
              return;
            }
            const old = known.get(uid);
            await opts.onEvent(old ? { type: 'modified', object: e.object, oldObject: old } : { type: 'added', object: e.object });
            known.set(uid, keep(e.object));
          },
          opts.signal,
        );
      }
    } catch (err) {
      if (opts.signal.aborted) return;
      if (isKubeError(err, 'Gone')) continue; // history compacted: relist at once
      opts.onError?.(err);
      await sleep(backoff, undefined, { signal: opts.signal }).catch(() => undefined);
      backoff = Math.min(maxBackoff, backoff * 2);
    }
  }
}

async function relist(
  opts: WatchSourceOptions,
  known: Map<string, KubeObject>,
  paging: { itemBytes: number },
  keep: (o: KubeObject) => KubeObject,
): Promise<string> {
  const budget = opts.pageBytes ?? 4 * 1024 * 1024;
  const seen = new Set<string>();
  let cont: string | undefined;
  let resourceVersion = '';
  do {
    // As many items as the budget holds at the size the last page measured.
    const limit = Math.max(1, Math.min(MAX_PAGE_ITEMS, Math.floor(budget / paging.itemBytes)));
    const listOptions = { namespace: opts.namespace, labelSelector: opts.labelSelector, limit, continue: cont };
    const page = opts.metadataOnly
      ? await opts.client.listMetadata(opts.resource, listOptions)
      : await opts.client.list(opts.resource, listOptions);
    resourceVersion = page.metadata.resourceVersion ?? resourceVersion;
    cont = page.metadata.continue || undefined;
    if (page.items.length)
      paging.itemBytes = Math.max(1, page.items.reduce((n, item) => n + JSON.stringify(item).length, 0) / page.items.length);
    for (const item of page.items) {
      // A list's items carry no apiVersion/kind; events do, so consumers see the same shape either way.
      const obj = opts.metadataOnly ? { ...item, ...opts.metadataOnly } : withTypeMeta(item, page.apiVersion, page.kind);
      const uid = obj.metadata.uid ?? '';
      seen.add(uid);
      const old = known.get(uid);
      if (old?.metadata.resourceVersion === obj.metadata.resourceVersion) continue;
      await opts.onEvent(old ? { type: 'modified', object: obj, oldObject: old } : { type: 'added', object: obj });
      known.set(uid, keep(obj));
    }
  } while (cont);
  for (const [uid, obj] of known) {
    if (seen.has(uid)) continue;
    await opts.onEvent({ type: 'deleted', object: obj });
    known.delete(uid);
  }
  if (!resourceVersion) throw new Error(`list of ${gvrString(opts.resource)} returned no resourceVersion`);
  return resourceVersion;
}

function withTypeMeta(item: KubeObject, apiVersion: string | undefined, listKind: string | undefined): KubeObject {
  if (item.apiVersion && item.kind) return item;
  const kind = listKind?.endsWith('List') ? listKind.slice(0, -'List'.length) : listKind;
  return { apiVersion: item.apiVersion ?? apiVersion, kind: item.kind ?? kind, ...item };
}
