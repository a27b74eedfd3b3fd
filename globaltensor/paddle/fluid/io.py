"""fluid.io: 1.x's save/load of static programs (on paddle.static's)."""
from ..static import io as _io

__all__ = ["save_inference_model", "load_inference_model", "save_params", "load_params", "save_persistables",
           "load_persistables"]


def save_inference_model(dirname, feeded_var_names, target_vars, executor, main_program=None, **kwargs):
    """1.x's argument order (a directory, feed names); writes the directory dirname/__model__.pdmodel."""
    import os
    from ..static import default_main_program
    program = main_program or default_main_program()
    feeds = [program.var(n) if isinstance(n, str) else n for n in feeded_var_names]
    _io.save_inference_model(os.path.join(dirname, "__model__"), feeds, target_vars, executor, program=program)


def load_inference_model(dirname, executor, **kwargs):
    import os
    return _io.load_inference_model(os.path.join(dirname, "__model__"), executor)


def save_params(executor, dirname, main_program=None, filename=None):
    import os
    from ..static import default_main_program
    _io.save(main_program or default_main_program(), os.path.join(dirname, filename or "params"))


def load_params(executor, dirname, main_program=None, filename=None):
    import os
    from ..static import default_main_program
    _io.load(main_program or default_main_program(), os.path.join(dirname, filename or "params"))


save_persistables, load_persistables = save_params, load_params
