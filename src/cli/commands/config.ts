/**
 * `vagen config show CONFIG [key=value ...]`: the resolved config, checked, as YAML.
 * The check is the config kind's own (`ConfigKind.load`): exactly what the command that
 * runs such a config checks before it starts. Secrets are shown as [redacted].
 */
import type { Command } from "commander";
import { stringify } from "yaml";
import { configKind, configKinds, didYouMean, redactSecrets, redactText, resolveConfig, validateResolved } from "../../config/index.ts";
import { VagenError } from "../../core/errors.ts";

export function register(program: Command): void {
  const config = program.command("config").description("inspect config files");
  config
    .command("show")
    .description("print a config after composition and overrides, validated against its schema")
    .argument("<config>", "YAML config file")
    .argument("[overrides...]", "key.path=value overrides")
    .option("--kind <kind>", "config kind to validate as (default: detected)")
    .option("--raw", "print without validating or filling in defaults")
    .action(async (file: string, overrides: string[], opts: { kind?: string; raw?: boolean }) => {
      const resolved = resolveConfig(file, overrides);
      if (opts.raw) {
        process.stdout.write(stringify(redactSecrets(resolved.data)));
        return;
      }
      const kinds = configKinds();
      const kind = opts.kind ? configKind(opts.kind) : kinds.find((k) => k.detect(resolved.data));
      if (opts.kind && !kind) {
        throw new VagenError(
          `unknown config kind "${opts.kind}"${didYouMean(opts.kind, kinds.map((k) => k.name))}`,
          `known kinds: ${kinds.map((k) => k.name).join(", ") || "none"}`,
        );
      }
      if (!kind) {
        throw new VagenError(
          `${file}: can't tell what kind of config this is`,
          `pass --kind (${kinds.map((k) => k.name).join(", ") || "none registered"}) or --raw to print it unchecked`,
        );
      }
      const checked = kind.load ? await kind.load(resolved) : validateResolved(kind.schema, resolved);
      const header = `# ${kind.name} config, resolved from ${file}${overrides.length ? ` with ${overrides.join(" ")}` : ""}\n`;
      process.stdout.write(redactText(header));
      process.stdout.write(stringify(redactSecrets(checked)));
    });
}
