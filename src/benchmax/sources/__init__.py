"""The field's environments run under benchmax's runtime (``docs/sources.md``).

Each module adapts one peer and imports it only when its environment is constructed:

* ``benchmax.sources.reasoning_gym:ReasoningGymEnv`` — a reasoning-gym task
  (``pip install 'benchmax[reasoning-gym]'``);
* ``benchmax.sources.openenv:OpenEnvEnv`` — an OpenEnv environment server at any URL
  (``benchmax[openenv]``);
* ``benchmax.sources.verifiers:VerifiersEnv`` — an installed verifiers 0.4 environment
  package (``benchmax[verifiers]``).

They are ordinary ``BaseEnv`` environments: ``benchmax run``, ``validate``, ``bundle`` and
``train`` take them as targets, with their constructor arguments as ``--env-arg``.
"""

__all__: list[str] = []
