// Bun imports YAML files natively (and embeds them in compiled binaries).
declare module "*.yaml" {
  const value: unknown;
  export default value;
}
