/** The remote-env protocol: client env (registered as `RemoteEnv`), server and codec. */
import type { EnvDefinition } from "../registry-types.ts";
import { RemoteEnv, remoteEnvConfigSchema } from "./client.ts";

export { RemoteEnv, RemoteEnvError, parseUrls, remoteEnvConfigSchema } from "./client.ts";
export { EnvServer, type EnvServerOptions, type EnvFactory } from "./server.ts";
export { encodeMultipart, decodeMultipart } from "./multipart.ts";

export const remoteEnv: EnvDefinition<typeof remoteEnvConfigSchema> = {
  name: "RemoteEnv",
  description: "Client of the remote-env HTTP protocol (VAGEN-compatible); every non-client key is forwarded to the server's env",
  configSchema: remoteEnvConfigSchema,
  configNotes: { base_urls: "required (or url_file); other keys go to the server's env" },
  create: (config) => new RemoteEnv(config),
};
