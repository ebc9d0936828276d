// The narrow Kubernetes API the controllers' shells depend on (docs/design/architecture.md#cluster-access-sharedkube): what they read and
// write, addressed by object rather than by position. KubeClient is the real one; test/fakes/kube.ts is an
// in-memory one for unit tests of the shells' branches.
import type { GVR, KubeList, KubeObject, ObjectMeta } from './resource.ts';
import type { IncomingMessage } from 'node:http';

/** One object of a resource: `namespace` left out for a cluster-scoped one; `subresource` (`status`) where a verb takes it. */
export interface ObjectRef {
  name: string;
  namespace?: string | undefined;
  subresource?: string | undefined;
}

/** What the apiserver answers with: an object it stores always has these (generateName is resolved to a name). */
export type StoredMeta = ObjectMeta & { name: string; uid: string; resourceVersion: string };
export type Stored<T extends KubeObject = KubeObject> = T & { metadata: StoredMeta };

export interface CreateOptions {
  /** Where to create it, when the object does not say. */
  namespace?: string | undefined;
  /** Writes the body when its bytes matter (a ControllerRevision's: shared/json.ts says why). */
  encode?: ((body: unknown) => string) | undefined;
  /** This write's field manager, instead of the client's. */
  fieldManager?: string | undefined;
}

export interface PatchOptions {
  /** Server-side apply only: take over fields other managers own. */
  force?: boolean;
  /** The answer as a PartialObjectMetadata: the patched object's body is neither sent nor parsed. */
  metadataOnly?: boolean;
  /** This write's field manager, instead of the client's (one per CompositeController or DecoratorController). */
  fieldManager?: string | undefined;
}

export type WatchOptions = ListOptions & { allowWatchBookmarks?: boolean; timeoutSeconds?: number; metadataOnly?: boolean };

export interface ListOptions {
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  limit?: number | undefined;
  continue?: string | undefined;
  resourceVersion?: string | undefined;
  /** With `resourceVersion`: NotOlderThan is served from the watch cache as soon as it has seen that version. */
  resourceVersionMatch?: 'NotOlderThan' | 'Exact' | undefined;
}

export type PatchType = 'merge' | 'json' | 'strategic' | 'apply';

export interface DeleteOptions {
  /** Refuse to delete unless the object still has this uid (and resourceVersion, when given). */
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
}

export interface WatchEvent<T extends KubeObject = KubeObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

/**
 * Whom a client acts as: sent as Impersonate-User and Impersonate-Group
 * (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation). For a service
 * account, leave `groups` out: the apiserver then adds its groups itself, and the caller needs no grant to
 * impersonate groups.
 */
export interface Impersonation {
  user: string;
  groups?: readonly string[] | undefined;
}

export interface KubeApi {
  /** Field manager of every write: outputs' managedFields are judged by it. */
  readonly fieldManager: string;
  get<T extends KubeObject = KubeObject>(r: GVR, ref: ObjectRef): Promise<Stored<T>>;
  /** `get`, with "not there" as undefined rather than an error. */
  find<T extends KubeObject = KubeObject>(r: GVR, ref: ObjectRef): Promise<Stored<T> | undefined>;
  list<T extends KubeObject = KubeObject>(r: GVR, opts?: ListOptions): Promise<KubeList<Stored<T>>>;
  /** `list`, answered with each object's metadata only (a PartialObjectMetadataList). */
  listMetadata(r: GVR, opts?: ListOptions): Promise<KubeList<Stored>>;
  /** Every page of a list. */
  listAll<T extends KubeObject = KubeObject>(r: GVR, opts?: ListOptions): Promise<Array<Stored<T>>>;
  create<T extends KubeObject = KubeObject>(r: GVR, obj: T, opts?: CreateOptions): Promise<Stored<T>>;
  patch<T extends KubeObject = KubeObject>(
    r: GVR,
    ref: ObjectRef,
    patch: unknown,
    type: PatchType,
    opts?: PatchOptions,
  ): Promise<Stored<T>>;
  delete(r: GVR, ref: ObjectRef, opts?: DeleteOptions): Promise<void>;
  watch<T extends KubeObject = KubeObject>(
    r: GVR,
    opts: WatchOptions,
    onEvent: (event: WatchEvent<T>) => void | Promise<void>,
    signal?: AbortSignal,
  ): Promise<void>;
  /** GET of a path that names no object: discovery (`/apis/apps/v1`). */
  getPath<T>(path: string): Promise<T>;
  /** The same API, acting as another identity (a ServiceAccount a definition names). */
  as(impersonation: Impersonation): KubeApi;
  /**
   * A POST through the apiserver to a path (a Service's proxy: docs/reference/hooks.md#hooks-inside-the-cluster), as
   * this client's identity, once, without retries; the answer whatever its status, its body unread. Absent from
   * clients that reach no apiserver (the in-memory fake).
   */
  proxy?(request: ProxyRequest): Promise<IncomingMessage>;
}

export interface ProxyRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
}
