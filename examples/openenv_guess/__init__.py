"""An OpenEnv environment (guess a number) served with openenv-core, for OpenEnvEnv."""
