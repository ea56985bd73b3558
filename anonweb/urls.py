from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from anonweb.accounts import views as account_views
from anonweb.common import views as common_views
from anonweb.dashboard import dataset_urls as dashboard_dataset_urls
from anonweb.dashboard import views as dashboard_views
from anonweb.datasets import urls as dataset_urls
from anonweb.jobs import urls as job_urls
from anonweb.releases import urls as release_urls


class FaviconRedirect(RedirectView):
    """To the icon's current name. The name holds a hash of the content and is only known once
    collectstatic has run, so it is looked up per request (not when the URLs load), and the
    redirect is temporary: a browser must not keep a name the next version drops."""

    permanent = False

    def get_redirect_url(self, *args, **kwargs):
        return static("favicon.svg")


urlpatterns = [
    path("", dashboard_views.home, name="home"),
    path("healthz", common_views.healthz, name="healthz"),
    # browsers ask for /favicon.ico on every page: the long-cached icon instead of a logged 404
    path("favicon.ico", login_not_required(FaviconRedirect.as_view())),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # One namespace, two layers: the datasets app's own pages and those that also read or start
    # jobs and releases (in the dashboard, above both).
    path(
        "datasets/",
        include((dataset_urls.urlpatterns + dashboard_dataset_urls.urlpatterns, "datasets")),
    ),
    path("jobs/", include("anonweb.jobs.urls")),
    path(
        "releases/",
        include((release_urls.urlpatterns + job_urls.release_urlpatterns, "releases")),
    ),
    path("audit/", include("anonweb.dashboard.audit_urls")),
    path("accounts/profile/", account_views.profile, name="profile"),
    path("api/", include("anonweb.api.urls")),
    path("admin/", admin.site.urls),
]
