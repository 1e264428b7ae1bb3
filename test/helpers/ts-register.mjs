// Registers the TypeScript hooks (ts-hooks.mjs) for tap and for child processes that run the
// sources: `node --import=./test/helpers/ts-register.mjs file.ts`. It replaces tap's
// @tapjs/typescript plugin, whose tsimp/ts-node start-up cost ~4.5 s per test file.
import { register } from 'node:module';

register('./ts-hooks.mjs', import.meta.url);
