/**
 * A child akbe process that owns an embedded server, as a run does (connectAkbeNats with
 * `embedded: true`), and holds it until killed: the short-lived commands that started one
 * before issue 21 item 6 no longer can. Run with `startScript` (cli-process.ts).
 */
import { connectAkbeNats } from '../../src/actors/nats/connection.js';

const nats = await connectAkbeNats({ embedded: true });
process.stdout.write(`owning ${nats.url} (${nats.source})\n`);
setInterval(() => undefined, 60_000);
