import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonweb.settings")
application = get_wsgi_application()
# Every page's module is imported and the URLs indexed now, as the worker starts, not during its
# first requests.
get_resolver().reverse_dict  # noqa: B018
# What is loaded by now lives as long as the process (Django, pandas, NumPy, the apps: a few
# hundred thousand objects): the garbage collector leaves it out of its full collections,
# which walked all of it again every time the requests' surviving objects added up.
gc.freeze()
