/**
 * A JSON value. It lives here, below every layer, because machines and tools carry JSON (tool
 * arguments, fact payloads) without depending on the event catalog that stores it.
 */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
