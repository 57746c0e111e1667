"""DOT (Zhao, Song & Qiu, ICCV 2023): SGD with separate task and distillation momenta."""
