import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const projectRoot = fileURLToPath(new URL('..', import.meta.url));
/** Build outputs and downloads (the apiserver binary, DynamoDB Local); git-ignored, reused between runs. */
export const cacheDir = process.env.OUTRIGGER_CACHE_DIR ?? join(projectRoot, '.cache');
