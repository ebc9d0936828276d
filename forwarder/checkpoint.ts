// Where the forwarder keeps its checkpoint (docs/operations/forwarder.md): a file (the local runtime, a pod's
// emptyDir), or ConfigMaps in the forwarder's own namespace, which a new pod on another node finds.
//
// In ConfigMaps the checkpoint is gzipped JSON. It lives in the head ConfigMap when it fits (the usual case:
// one conditional update per write); a larger one (ConfigMaps hold at most 1 MiB) is split into parts
// `<name>-<generation>-<i>`, written first, then named by the head in one update, then the previous
// generation's parts are deleted: a forwarder killed mid-write leaves the previous checkpoint whole.
import { readFile, rename, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { gvr, isKubeError, type KubeClient, type KubeObject } from '../shared/kube/index.ts';
import type { Log } from '../shared/log.ts';

export interface CheckpointStore {
  /** The last checkpoint saved, or undefined when there is none. */
  load(): Promise<string | undefined>;
  save(text: string): Promise<void>;
  /** Where it is, for logs. */
  readonly where: string;
}

export class FileCheckpoint implements CheckpointStore {
  readonly where: string;
  private readonly file: string;
  constructor(file: string) {
    this.file = file;
    this.where = file;
  }
  async load(): Promise<string | undefined> {
    return (await readFile(this.file, 'utf8').catch(() => undefined)) || undefined;
  }
  async save(text: string): Promise<void> {
    // Written aside and renamed: a kill mid-write leaves the previous checkpoint whole.
    await writeFile(`${this.file}.tmp`, text);
    await rename(`${this.file}.tmp`, this.file);
  }
}

const configMaps = gvr('', 'v1', 'configmaps');
type ConfigMap = KubeObject & { binaryData?: Record<string, string> };

const KEY = 'checkpoint.json.gz';
const GENERATION = 'outrigger.dev/checkpoint-generation';
const PARTS = 'outrigger.dev/checkpoint-parts';
const OF = 'outrigger.dev/checkpoint-of';
/** Under the apiserver's 1 MiB per ConfigMap, with room for the object's metadata. */
export const MAX_PART_BYTES = 900 * 1024;

export class ConfigMapCheckpoint implements CheckpointStore {
  readonly where: string;
  /** The head's resourceVersion as last read or written: every write is conditional on it. */
  private resourceVersion: string | undefined;
  /** Parts the head named when last read or written (unknown before: a previous process may have left some). */
  private partsBefore: number | undefined;
  private readonly kube: KubeClient;
  private readonly namespace: string;
  private readonly name: string;
  private readonly maxPartBytes: number;
  private readonly log: Log;

  constructor(opts: { kube: KubeClient; namespace: string; name: string; maxPartBytes?: number; log?: Log }) {
    this.kube = opts.kube;
    this.namespace = opts.namespace;
    this.name = opts.name;
    this.maxPartBytes = opts.maxPartBytes ?? MAX_PART_BYTES;
    this.log = opts.log ?? (() => undefined);
    this.where = `configmap ${opts.namespace}/${opts.name}`;
  }

  async load(): Promise<string | undefined> {
    const head = await this.kube.find<ConfigMap>(configMaps, { name: this.name, namespace: this.namespace });
    this.resourceVersion = head?.metadata.resourceVersion;
    if (!head) return undefined;
    const annotations = head.metadata.annotations ?? {};
    const parts = Number(annotations[PARTS] ?? '0');
    this.partsBefore = parts;
    let zipped: Buffer;
    if (parts === 0) {
      const inline = head.binaryData?.[KEY];
      if (!inline) return undefined;
      zipped = Buffer.from(inline, 'base64');
    } else {
      const generation = annotations[GENERATION] ?? '';
      const chunks: Buffer[] = [];
      for (let i = 0; i < parts; i += 1) {
        const part = await this.kube.get<ConfigMap>(configMaps, { name: this.partName(generation, i), namespace: this.namespace });
        chunks.push(Buffer.from(part.binaryData?.[KEY] ?? '', 'base64'));
      }
      zipped = Buffer.concat(chunks);
    }
    return (await promisify(gunzip)(zipped)).toString('utf8');
  }

  async save(text: string): Promise<void> {
    const zipped = await promisify(gzip)(Buffer.from(text, 'utf8'));
    const generation = `${Date.now().toString(36)}${Math.floor(Math.random() * 36 ** 4).toString(36)}`;
    const chunks: Buffer[] = [];
    if (zipped.length > this.maxPartBytes)
      for (let at = 0; at < zipped.length; at += this.maxPartBytes) chunks.push(zipped.subarray(at, at + this.maxPartBytes));
    for (const [i, chunk] of chunks.entries()) {
      await this.kube.create<ConfigMap>(configMaps, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: this.partName(generation, i), namespace: this.namespace, labels: { [OF]: this.name } },
        binaryData: { [KEY]: chunk.toString('base64') },
      });
    }
    const head: ConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: this.name,
        namespace: this.namespace,
        annotations: { [GENERATION]: generation, [PARTS]: String(chunks.length) },
        ...(this.resourceVersion ? { resourceVersion: this.resourceVersion } : {}),
      },
      binaryData: chunks.length ? {} : { [KEY]: zipped.toString('base64') },
    };
    this.resourceVersion = (await this.writeHead(head)).metadata.resourceVersion;
    // Parts are listed only when some may be there: the usual inline checkpoint costs one request.
    if (chunks.length || this.partsBefore !== 0) await this.deleteStaleParts(chunks.length ? generation : undefined);
    this.partsBefore = chunks.length;
  }

  private async writeHead(head: ConfigMap): Promise<ConfigMap> {
    try {
      return head.metadata.resourceVersion ? await this.kube.replace(configMaps, head) : await this.kube.create(configMaps, head);
    } catch (err) {
      if (!isKubeError(err, 'Conflict') && !isKubeError(err, 'AlreadyExists') && !isKubeError(err, 'NotFound')) throw err;
      // Someone else wrote it since this process read it (a previous leader finishing its last write, or a hand
      // edit): the leader's index is the one to keep, so it writes again over what is there now.
      const current = await this.kube.find<ConfigMap>(configMaps, { name: this.name, namespace: this.namespace });
      this.log('warn', 'checkpoint changed by another writer; overwriting it', { configMap: this.name });
      const again = { ...head, metadata: { ...head.metadata, resourceVersion: current?.metadata.resourceVersion } };
      return current
        ? await this.kube.replace(configMaps, again)
        : await this.kube.create(configMaps, { ...again, metadata: { ...head.metadata, resourceVersion: undefined } });
    }
  }

  private async deleteStaleParts(keep: string | undefined): Promise<void> {
    const parts = await this.kube.list(configMaps, { namespace: this.namespace, labelSelector: `${OF}=${this.name}` });
    for (const part of parts.items) {
      if (keep && part.metadata.name?.startsWith(`${this.name}-${keep}-`)) continue;
      await this.kube.delete(configMaps, { name: part.metadata.name!, namespace: this.namespace }).catch((err: unknown) => {
        if (!isKubeError(err, 'NotFound')) throw err;
      });
    }
  }

  private partName(generation: string, i: number): string {
    return `${this.name}-${generation}-${i}`;
  }
}
