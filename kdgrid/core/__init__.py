"""The distillation core: models, capture, knowledge, matching, data, training, metrics."""
