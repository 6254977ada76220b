"""OpenAI-compatible text generation: ``POST /v1/completions`` and ``/v1/chat/completions``
over the runtime pool's generation engine (``RuntimePool.generate_async``)."""
